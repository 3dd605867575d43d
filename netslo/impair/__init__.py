"""Impairments: netem specs (``spec``), pyroute2 netem (``netem``), capability detection
(``capability``) and closed-loop verification (``verify``). See docs/impairments.md."""
