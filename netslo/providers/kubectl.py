"""Transitional: ``Kubectl(binary, kubeconfig, context)`` for callers not yet moved to ``KubeApi``.

netslo no longer runs the kubectl binary; every API object and exec goes through
``netslo.providers.kubeapi.KubeApi`` (the kubernetes client). ``binary`` is ignored. Remove this module
once ``kind.py`` constructs ``KubeApi(kubeconfig, context)`` itself.
"""

from __future__ import annotations

from .kubeapi import KubeApi


def Kubectl(binary: str | None = None, kubeconfig: str | None = None,  # noqa: N802 (old class name)
            context: str | None = None) -> KubeApi:
    return KubeApi(kubeconfig, context)
