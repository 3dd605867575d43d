"""A node-pair mesh: which pairs and when (``schedule``), and the mesh measured and judged
(``measure``)."""
