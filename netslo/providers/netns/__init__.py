"""The embedded cluster: network namespaces on this host (``cluster``), its emulated NetworkPolicies
(``policy``), Service programming (``service_program``) and kube-proxy Services (``services``), and
the user-mode-linux kernel that gives it sch_netem where the host lacks it (``uml``, ``uml_guest``)."""
