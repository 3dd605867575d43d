"""QoS: DSCP preservation, priority classes, bandwidth annotations, congestion control, bufferbloat.

Modules (one concept each): ``dscp_check`` (per-hop DSCP verdicts from sniffed scapy packets),
``priority`` (htb classes keyed on DSCP), ``bandwidth`` (the CNI bandwidth plugin's tbf/ifb shaping of
pod annotations), ``conformance`` (100 ms bins -> steady state, overshoot, time to conform),
``tcpflow`` (bulk/message TCP flows sampling TCP_INFO), ``shaping`` (bottleneck qdiscs and netfilter
rules on node links), ``background`` (bounded helper processes in pod namespaces), ``limits`` (known
CNI limitations as data), ``spec`` (slo-qos.yaml and its ``qos:`` section), ``experiments`` (the
measurements the QoS gate judges). See docs/qos.md.
"""
