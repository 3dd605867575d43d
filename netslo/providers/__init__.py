"""Providers: where pods live. ``netns`` (embedded, default), ``kind``, ``minikube``, ``existing``."""

from __future__ import annotations

from ..errors import SpecError

PROVIDERS = ("netns", "kind", "minikube", "existing")


def make_provider(name: str, **options):
    """Provider by name; options are provider-specific (datapath, nodes, kubeconfig...)."""
    if name == "netns":
        from .netns import NetnsProvider
        return NetnsProvider(**options)
    if name in PROVIDERS:
        from ..errors import Unsupported
        raise Unsupported(f"provider {name!r} is not available in this build")
    raise SpecError("--provider", name, f"one of {', '.join(PROVIDERS)}")
