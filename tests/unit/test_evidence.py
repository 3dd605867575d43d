"""Evidence on infrastructure errors: the tc output reduced to the path's devices, sections cut to a
bound, the indented block in the message, the dict found through exception chains, and one Allure
attachment per section; sysctl restore names what stayed."""

import allure
import pytest

from netslo.core import evidence
from netslo.core.errors import InfrastructureError
from netslo.report import allure as al
from netslo.studies.qos import sysctls

TC = """qdisc noqueue 0: dev lo root refcnt 2
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)
qdisc noqueue 0: dev eth0 root refcnt 2
 Sent 120 bytes 2 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
qdisc netem 1: dev veth3 root refcnt 2 limit 1000 delay 5ms
 Sent 9 bytes 1 pkt (dropped 4, overlimits 0 requeues 0)
qdisc noqueue 0: dev veth4 root refcnt 2
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)"""


def test_tc_output_keeps_only_the_path_devices_with_their_counters():
    kept = evidence.qdisc_blocks(TC, ("veth3", "eth0"))
    assert kept.splitlines() == TC.splitlines()[2:7]
    assert "dev lo" not in evidence.qdisc_blocks(TC, None) and "veth4" in evidence.qdisc_blocks(TC, None)
    assert evidence.qdisc_blocks(TC, ("cni0",)) == "(no qdisc on cni0)"


LINKS = """lo               UNKNOWN        00:00:00:00:00:00 <LOOPBACK,UP,LOWER_UP>
eth0@if3         UP             26:ca:1d:7e:a4:01 <BROADCAST,MULTICAST,UP,LOWER_UP>
cni0             UP             0a:58:0a:f4:01:01 <BROADCAST,MULTICAST,UP,LOWER_UP>
veth4@if2        UP             f2:5c:a1:9a:6c:9b <BROADCAST,MULTICAST,UP,LOWER_UP>
veth5@if2        UP             a6:e3:47:30:63:c8 <BROADCAST,MULTICAST,UP,LOWER_UP>"""


def test_link_lines_keep_the_path_devices_by_name_without_the_peer_suffix():
    assert [ln.split()[0] for ln in evidence.link_lines(LINKS, ("veth4", "cni0")).splitlines()] == ["cni0", "veth4@if2"]
    assert "lo " not in evidence.link_lines(LINKS, None) and "veth5@if2" in evidence.link_lines(LINKS, None)


def test_sections_are_cut_and_say_how_much_was_left_out():
    text = "\n".join(f"line {i}" for i in range(50))
    assert evidence.cut(text, 3) == "line 0\nline 1\nline 2\n... (47 more lines)"
    assert evidence.cut("a\nb", 3) == "a\nb"


def test_attached_error_has_an_indented_block_and_the_dict():
    sections = {"ss -tin: client pod c (ns-c)": "State\nSYN-SENT 0 1 10.244.1.2:4242 10.244.0.2:7001",
                "iptables-save -c: server pod s (ns-s)": "\n".join(["*filter"] + [f"rule {i}" for i in range(30)])}
    err = evidence.attach(InfrastructureError("probe tcp-rr in pod c exited with 1: TimeoutError"), sections)
    lines = str(err).splitlines()
    assert lines[0] == "probe tcp-rr in pod c exited with 1: TimeoutError"
    assert lines[1].startswith("evidence (each section cut to 20 lines")
    assert "  ss -tin: client pod c (ns-c):" in lines and "    SYN-SENT 0 1 10.244.1.2:4242 10.244.0.2:7001" in lines
    assert f"    ... ({31 - evidence.MESSAGE_LINES} more lines)" in lines
    assert err.evidence == sections and isinstance(err, InfrastructureError)
    assert evidence.attach(InfrastructureError("x"), {}).__dict__.get("evidence") is None


def test_evidence_is_found_through_raise_from_and_attached_per_section(monkeypatch):
    inner = evidence.attach(InfrastructureError("connect timed out"), {"ip route: client pod c (n)": "default via x",
                                                                        "ip neigh: client pod c (n)": "(empty)"})
    try:
        try:
            raise inner
        except InfrastructureError as e:
            raise RuntimeError("the test's own wrapper") from e
    except RuntimeError as outer:
        chained = outer
    assert evidence.of(chained) == inner.evidence and evidence.of(ValueError("x")) == {}
    attached = []
    monkeypatch.setattr(allure, "attach", lambda body, name, attachment_type: attached.append((name, body)))
    assert al.attach_evidence(chained) == 2
    assert attached == [("evidence: ip route: client pod c (n)", "default via x"),
                        ("evidence: ip neigh: client pod c (n)", "(empty)")]
    assert al.attach_evidence(ValueError("no evidence")) == 0 and len(attached) == 2


class _StuckSysctl:
    """A pod namespace whose sysctl writes are refused (as for a read-only key)."""

    def __init__(self, value):
        self.value = value

    def exec_in(self, pod, argv, timeout=60.0):
        if argv[:2] == ["sysctl", "-n"]:
            return (self.value + "\n").encode()
        raise InfrastructureError(f"sysctl in pod {pod.name} exited with 255: permission denied")


def test_sysctl_restore_names_the_key_the_pod_and_what_stayed():
    pod = type("P", (), {"name": "client"})()
    with pytest.raises(InfrastructureError) as e:
        sysctls.restore(_StuckSysctl("0"), pod, {"net.ipv4.tcp_slow_start_after_idle": "1"})
    assert str(e.value).startswith("sysctl not restored: net.ipv4.tcp_slow_start_after_idle in pod client: "
                                   "should be '1' again, holds '0' (write failed:")
    sysctls.restore(_StuckSysctl("4096 131072"), pod, {"net.ipv4.tcp_rmem": "4096\t131072"})  # same value
