"""A teardown that fails is an error, on the real kernel: a netem impairment or a tbf bottleneck whose
root qdisc was replaced behind netslo's back is reported naming the device and what was found there,
and the foreign qdisc is left alone; a rule or qdisc that is already gone is fine; an impairment
fixture whose removal fails ends the test with a teardown ERROR."""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from netslo.core.errors import InfrastructureError
from netslo.impair import capability, netem
from netslo.impair.shaping import qdiscs
from netslo.impair.spec import parse
from netslo.providers.netns.cluster import NetnsCluster
from netslo.studies.qos import sysctls
from tests.integration.test_netem_verify import env  # noqa: F401  (host netem, else user-mode-linux)

ROOT = Path(__file__).resolve().parents[2]
FOREIGN_TBF = ["tbf", "rate", "10mbit", "burst", "32kb", "latency", "50ms"]


def tc_in(ns: str, *args: str) -> str:
    return subprocess.run(["nsenter", f"--net=/run/netns/{ns}", "tc", *args], capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture(scope="module")
def host():
    with NetnsCluster(nodes=2, datapath="bridge") as c:
        yield c


def test_bottleneck_replaced_behind_netslos_back_is_an_error_naming_the_device(host):
    ns = host.node_netns("node1")
    with pytest.raises(InfrastructureError) as e:
        with qdiscs.bottleneck(ns, "eth0", 10e6, 0.02):
            tc_in(ns, "qdisc", "replace", "dev", "eth0", "root", "handle", "2:", "pfifo", "limit", "100")
    msg = str(e.value)
    assert f"eth0 in {ns}: root qdisc is pfifo 2:, not netslo's tbf 1:" in msg and "left in place" in msg
    assert "qdisc pfifo 2: root" in tc_in(ns, "qdisc", "show", "dev", "eth0")  # left alone
    with pytest.raises(InfrastructureError, match="root qdisc is pfifo 2:"):  # and never replaced
        with qdiscs.bottleneck(ns, "eth0", 10e6, 0.02):
            pass
    tc_in(ns, "qdisc", "del", "dev", "eth0", "root")


def test_what_is_already_gone_is_not_an_error(host):
    ns = host.node_netns("node1")
    with qdiscs.bottleneck(ns, "eth0", 10e6, 0.02):
        tc_in(ns, "qdisc", "del", "dev", "eth0", "root")
    with qdiscs.netfilter_rule(ns, "filter", "FORWARD", ["-p", "udp", "--dport", "9"], tag="t-gone") as rule:
        qdiscs.iptables(ns, ["-D", "FORWARD", *rule.spec])
    assert "tbf" not in tc_in(ns, "qdisc", "show", "dev", "eth0")


def test_sysctl_is_restored_and_read_back_even_when_the_block_fails(host):
    pod = host.add_pod("sysctl", "node0")
    key = "net.ipv4.tcp_slow_start_after_idle"
    before = sysctls.read(host, pod, key)
    with pytest.raises(RuntimeError):
        with sysctls.kept(host, pod, [key]):
            sysctls.write(host, pod, {key: "0" if before == "1" else "1"})
            raise RuntimeError("the test failed")
    assert sysctls.read(host, pod, key) == before


@pytest.mark.parametrize("direction", ["egress", "ingress"])
def test_impairment_replaced_behind_netslos_back_is_an_error_naming_the_device(env, direction):
    c, imp, _, client, _ = env
    dev = "eth0" if direction == "egress" else netem.IFB_NAME
    imp.apply(client, parse({"delay": "5ms", "direction": direction}))
    c.exec_in(client, ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "5:", *FOREIGN_TBF])
    with pytest.raises(InfrastructureError) as e:
        imp.clear()
    msg = str(e.value)
    assert f"pod client: netem removal ({direction}): {dev} in " in msg, msg
    assert "root qdisc is tbf 5:, not netslo's netem 1:" in msg and "left in place" in msg, msg
    shown = c.exec_in(client, ["tc", "qdisc", "show", "dev", dev]).decode()
    assert "qdisc tbf 5: root" in shown, shown  # the foreign qdisc is left alone
    if direction == "ingress":
        assert "ingress" not in c.exec_in(client, ["tc", "qdisc", "show", "dev", "eth0"]).decode()
        c.exec_in(client, ["ip", "link", "del", dev])
    else:
        c.exec_in(client, ["tc", "qdisc", "del", "dev", dev, "root"])
    imp.clear()  # nothing left: no error


def test_apply_never_replaces_a_foreign_qdisc(env):
    c, imp, _, client, _ = env
    c.exec_in(client, ["tc", "qdisc", "replace", "dev", "eth0", "root", "handle", "3:", *FOREIGN_TBF])
    try:
        with pytest.raises(InfrastructureError, match="eth0 in .*: root qdisc is tbf 3:, not netslo's netem 1:"):
            imp.apply(client, parse({"delay": "5ms"}))
        assert "qdisc tbf 3: root" in c.exec_in(client, ["tc", "qdisc", "show", "dev", "eth0"]).decode()
    finally:
        c.exec_in(client, ["tc", "qdisc", "del", "dev", "eth0", "root"])
        imp.clear()  # the failed apply left nothing behind


REPLACED_TEST = '''
import pytest
pytestmark = pytest.mark.needs_netem


def test_replaces_the_netem(netslo_impairment, netslo_impaired_cluster):
    client, _ = netslo_impairment({"delay": "5ms"}, count=300)
    netslo_impaired_cluster.cluster.exec_in(client, ["tc", "qdisc", "replace", "dev", "eth0", "root", "handle",
                                                     "5:", "tbf", "rate", "10mbit", "burst", "32kb", "latency", "50ms"])
'''


def test_impairment_fixture_whose_removal_fails_errors_the_test():
    """A real pytest run: the test body passes, its impairment teardown finds a foreign tbf."""
    if not (capability.detect().netem or capability.uml_available()[0]):
        pytest.skip("no netem anywhere")
    work = Path(tempfile.mkdtemp(prefix="_tmp_replaced_", dir=ROOT / "tests" / "integration"))
    try:
        (work / "test_replaced.py").write_text(REPLACED_TEST)
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              f"--netslo-results={work / 'res'}", str(work / "test_replaced.py")],
                             cwd=ROOT, capture_output=True, text=True, timeout=600)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "1 passed, 1 error" in out, out[-3000:]
    assert "ERROR at teardown of test_replaces_the_netem" in out, out[-3000:]
    assert "netem removal (egress): eth0 in " in out and "root qdisc is tbf 5:" in out, out[-3000:]
