"""kind clusters: the provider (``cluster``), the host side of its nodes (``host``) and the kind
configs it writes (``kind-<cni>.yaml``)."""
