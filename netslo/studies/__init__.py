"""Studies: measurements beyond one scenario at a time, each with its own verdict: NetworkPolicy
enforcement and cost, Service programming, DNS, the three protocol layers, interleaved comparisons,
application workloads and the QoS experiments (``qos``)."""
