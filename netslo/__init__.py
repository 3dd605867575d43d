"""netslo: network SLO gate for Kubernetes pod networks (engine, usable without pytest)."""

__version__ = "0.1.0"
