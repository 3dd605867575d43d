"""What crosses the pod network: the probes (clients that record samples), the responders (servers)
and the wire formats, socket options and clocks both sides share."""
