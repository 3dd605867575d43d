"""Kernels other than the host's: ``uml`` runs the embedded cluster inside user-mode-linux (real
sch_netem where the host kernel lacks it); ``uml_guest`` is its guest-side server."""
