"""Node shaping: bottleneck and loss qdiscs, DSCP priority classes, the bandwidth annotations'
tbf/ifb shaping, and the node links and node command that apply them (used by the QoS studies)."""
