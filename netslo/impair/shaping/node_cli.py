"""``python -m netslo.agent qos ...``: the QoS studies' work on a node's links, run on that node.

    python -m netslo.agent qos describe                         the uplink: device, layer, tunnel port
    python -m netslo.agent qos priority --spec '{"policy": {...}, "control": [["sport", 10250], ...]}'
                                                                htb + DSCP u32 filters on the uplink,
                                                                the control ports' TCP in class 1:2
    python -m netslo.agent qos counters                         bytes per htb class of the uplink
    python -m netslo.agent qos bottleneck --spec '{"rate_bits": R, "queue_s": Q}'   root tbf on the uplink
    python -m netslo.agent qos clear --spec '{"kind": "htb"|"tbf"}'               netslo's root qdisc off
    python -m netslo.agent qos drop-add|drop-counts|drop-remove --spec '{"probability": P, "src": IP,
                          "dst": IP, "dport": N}'              random drop where the segments leave the node
    python -m netslo.agent qos pod --pod-ip IP                  the pod's host interface, held rates, MTUs
    python -m netslo.agent qos reshape --pod-ip IP --spec '{"egress_bits": R}'    netslo's tbf on its egress
    python -m netslo.agent qos root-qdisc --spec '{"ifname": NAME}'
    python -m netslo.agent qos capture --spec '{"points": [[POD_IP|null, IFNAME], ...], "marker": HEX,
                          "want": N, "timeout": S, "ready": FILE}'   sniff netslo.traffic.dscp_capture's frames
    python -m netslo.agent qos send --pod-ip IP --spec PLAN     send them from the pod (dscp_check plan)

Runs in the node agent DaemonSet's pod (hostNetwork: its namespace is the node's; see
netslo.providers.kube.impair) with the same code the embedded provider runs from its host:
``netslo.impair.shaping.node_links.LocalNodeLinks`` on this namespace, the uplink being the default-route device
and the layer "vxlan-inner" where the CNI has a VXLAN device (``node_links.uplink_of``). A pod is
found by its IP (``netslo.impair.podns``); its host-side interface is its eth0's veth peer here.
stdout: one JSON object; failures as ``python -m netslo.agent netem`` reports them (one JSON line on
stderr; exit 1 infrastructure, 2 usage, 3 unsupported).
"""

from __future__ import annotations

import json
import platform

from pyroute2.netlink.exceptions import NetlinkError

from netslo.core.errors import InfrastructureError, SpecError, Unsupported
from netslo.impair import node_cli as netem_cli
from netslo.impair.shaping import node_links, priority

ACTIONS = ("describe", "priority", "counters", "bottleneck", "clear", "drop-add", "drop-counts", "drop-remove",
           "pod", "reshape", "root-qdisc", "capture", "send")
POD_ACTIONS = ("pod", "reshape", "send")


def policy_doc(policy: priority.QosPolicy) -> dict:
    """A policy as JSON data (``policy_of`` reads it back)."""
    return {"link_bits": policy.link_bits, "queue_s": policy.queue_s, "burst_bytes": policy.burst_bytes,
            "classes": [{"name": c.name, "rate_bits": c.rate_bits, "ceil_bits": c.ceil_bits, "prio": c.prio,
                         "dscp": list(c.dscp), "default": c.default} for c in policy.classes]}


def policy_of(doc: dict) -> priority.QosPolicy:
    try:
        classes = tuple(priority.QosClass(c["name"], float(c["rate_bits"]), float(c["ceil_bits"]), int(c["prio"]),
                                          tuple(int(d) for d in c["dscp"]), bool(c["default"]))
                        for c in doc["classes"])
        return priority.QosPolicy(float(doc["link_bits"]), classes, float(doc["queue_s"]), int(doc["burst_bytes"]))
    except (KeyError, TypeError, ValueError) as e:
        raise SpecError("--spec policy", str(doc)[:80], f"a policy as policy_doc writes it ({e})") from None


def control_of(doc) -> tuple:
    """``[["sport"|"dport", port], ...]`` -> priority.install's ``control`` (values checked there)."""
    if not isinstance(doc, list) or not all(isinstance(c, list) and len(c) == 2 for c in doc):
        raise SpecError("--spec control", str(doc)[:80], 'a list of ["sport" or "dport", TCP port] pairs')
    return tuple((d, p) for d, p in doc)


class _Pods:
    """Pods of this node by IP: their namespace and host-side interface."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir

    def find(self, pod):
        from netslo.impair import podns
        return podns.find(podns.check_ip(pod), self.run_dir)

    def netns(self, pod) -> str:
        import os
        return os.path.join(self.run_dir, self.find(pod).name)

    def host_interface(self, pod) -> str:
        """The name, in this (the node's) namespace, of the veth peer of the pod's interface."""
        from netslo.core.netns_access import rtnl
        found = self.find(pod)
        with rtnl(node_links.HERE) as ipr:
            peer = ipr.get_links(found.peer_index) if found.peer_index and ipr.link_lookup(index=found.peer_index) else []
        if not peer:
            raise InfrastructureError(f"pod {pod}: its {found.ifname} has no veth peer on this node")
        return peer[0].get_attr("IFLA_IFNAME")


def _spec(text: str | None, keys: tuple) -> dict:
    try:
        doc = json.loads(text or "{}")
    except ValueError as e:
        raise SpecError("--spec", (text or "")[:80], f"JSON ({e.msg} at column {e.colno})") from None
    missing = [k for k in keys if not isinstance(doc, dict) or k not in doc]
    if missing:
        raise SpecError(f"--spec {missing[0]}", text, f"a JSON object with {', '.join(keys)}")
    return doc


def run(action: str, pod_ip: str | None, spec: str | None, run_dir: str) -> dict:
    if action not in ACTIONS:
        raise SpecError("action", action, f"one of {', '.join(ACTIONS)}")
    if action in POD_ACTIONS and not pod_ip:
        raise SpecError("--pod-ip", pod_ip, "the target pod's IP address")
    where = node_links.uplink_of()
    pods = _Pods(run_dir)
    links = node_links.LocalNodeLinks(netem_cli.node_name(), node_links.HERE, where["uplink"], where["layer"],
                                      where["tunnel_port"], pods.host_interface, pods.netns, tunnel_rules=True)
    out = {"node": links.node, "kernel": platform.release(), **where}
    if action == "describe":
        return out
    if action == "priority":
        doc = _spec(spec, ("policy",))
        links.control = control_of(doc.get("control", []))
        inst = links.install_priority(policy_of(doc["policy"]))
        out["filters"] = [{"flowid": f["flowid"], "match": {str(k): v for k, v in f["match"].items()}}
                          for f in inst.filters]
    elif action == "counters":
        out["class_bytes"] = links.class_counters()
    elif action == "bottleneck":
        doc = _spec(spec, ("rate_bits", "queue_s"))
        b = links.install_bottleneck(float(doc["rate_bits"]), float(doc["queue_s"]))
        out.update(rate_bits=b.rate_bits, limit_bytes=b.limit_bytes, burst_bytes=b.burst_bytes)
    elif action == "clear":
        kind = _spec(spec, ("kind",))["kind"]
        if kind not in ("htb", "tbf"):
            raise SpecError("--spec kind", kind, "htb or tbf")
        links.clear(kind)
    elif action.startswith("drop-"):
        doc = _spec(spec, ("probability", "src", "dst", "dport"))
        rules = links.drop_rules(float(doc["probability"]), doc["src"], doc["dst"], int(doc["dport"]))
        if action == "drop-add":
            rules.add(first=True)
        elif action == "drop-counts":
            out["dropped"], out["matched"] = rules.counts()
        else:
            rules.remove()
    elif action == "pod":
        out.update(host_if=pods.host_interface(pod_ip), bandwidth=links.pod_bandwidth(pod_ip),
                   link_mtu=links.pod_link_mtu(pod_ip), pod_mtu=links.pod_mtu(pod_ip))
    elif action == "reshape":
        links.reshape_pod(pod_ip, float(_spec(spec, ("egress_bits",))["egress_bits"]))
        out["bandwidth"] = links.pod_bandwidth(pod_ip)
    elif action == "root-qdisc":
        out["root_qdisc"] = links.root_qdisc(_spec(spec, ("ifname",))["ifname"])
    elif action == "capture":
        out["seen"] = _capture(pods, _spec(spec, ("points", "marker", "want", "timeout", "ready")))
    else:
        _send(pods.netns(pod_ip), _spec(spec, ("src", "dst", "port", "dscps", "per_mark", "marker")))
    return out


def _capture(pods: _Pods, doc: dict) -> list:
    """Sniffers on the points (a pod's interface by its IP, else the node's), ``ready`` file written
    once they are open, then the frames until the last point saw ``want`` or ``timeout`` s passed."""
    from netslo.traffic.dscp_capture import Sniffers
    points = [(pods.netns(ip) if ip else node_links.HERE, ifname) for ip, ifname in doc["points"]]
    sniff = Sniffers(points, bytes.fromhex(doc["marker"]))
    try:
        with open(doc["ready"], "w"):
            pass
        return sniff.wait(int(doc["want"]), float(doc["timeout"]))
    finally:
        sniff.close()


def _send(netns: str, plan: dict) -> None:
    import time

    from netslo.traffic.dscp_capture import raw_sender, send_marked
    tx = raw_sender(netns)
    try:
        send_marked(tx, plan, time.sleep)
    finally:
        tx.close()


def main(argv: list[str]) -> int:
    from netslo.impair import podns
    args = {"--pod-ip": None, "--spec": None, "--netns-dir": podns.NETNS_RUN_DIR}
    try:
        if not argv:
            raise SpecError("qos action", "(none)", f"one of {', '.join(ACTIONS)}")
        action, rest = argv[0], argv[1:]
        while rest:
            if rest[0] not in args or len(rest) < 2:
                raise SpecError("qos arguments", " ".join(rest), "--pod-ip IP, --spec JSON, --netns-dir DIR")
            args[rest[0]], rest = rest[1], rest[2:]
        out = run(action, args["--pod-ip"], args["--spec"], args["--netns-dir"])
    except SpecError as e:
        return netem_cli.fail("usage", netem_cli.EXIT_USAGE, str(e))
    except Unsupported as e:
        return netem_cli.fail("unsupported", netem_cli.EXIT_UNSUPPORTED, str(e))
    except (InfrastructureError, OSError, NetlinkError) as e:
        return netem_cli.fail("infrastructure", netem_cli.EXIT_INFRA, f"qos {argv[:1]}: {e}")
    print(json.dumps(out, sort_keys=True, ensure_ascii=False))
    return 0
