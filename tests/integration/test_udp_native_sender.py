"""The compiled UDP sender (``--sender native``) on a real path of the embedded provider: the rows it
returns say what the Python sender's rows say, marks travel, late replies are counted, bad use is
one line. (Its loss accounting against iptables drops: test_loss_accounting.py.)"""

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from netslo.providers.netns.cluster import NetnsCluster, pids_in_netns
from netslo.stats import analysis as stats
from netslo.stats import stream
from netslo.stats.samples import empty
from netslo.traffic.probes import ProbeSpec, udp_native

N = 3000
INTERVAL = 0.0002


@pytest.fixture(scope="module")
def path():
    if udp_native.sender()[0] is None:
        pytest.skip(f"native sender: {udp_native.sender()[1]}")
    with NetnsCluster(nodes=2) as c:
        srv, cli = c.add_pod("server", "node0"), c.add_pod("client", "node1")
        ports = c.start_responders(srv, ("udp",))
        yield c, srv, cli, ports["udp"]


def test_native_rows_hold_the_schedule_the_answers_and_the_marks(path):
    c, srv, cli, port = path
    s = c.probe(cli, ProbeSpec("udp", srv.ip, port, count=N, interval=INTERVAL, req_bytes=200, resp_bytes=300,
                               tos=0xb8, wait=0.5, sender="native"))
    r = s.rows
    assert s.meta["sender"] == "native" and s.meta["fin_answered"] and s.meta["late_responses"] == 0
    assert np.array_equal(r["seq"], np.arange(N))
    assert np.all(np.diff(r["sched_ns"]) == int(INTERVAL * 1e9))          # the schedule, exactly
    assert np.all(r["send_ns"] >= r["sched_ns"])
    got = r["recv_ns"] >= 0
    assert got.all() and np.all(r["srv_seen"] == 1)
    # one clock (CLOCK_MONOTONIC) on both ends: send < responder rx <= responder tx < receive
    assert np.all((r["send_ns"] < r["srv_rx_ns"]) & (r["srv_rx_ns"] <= r["srv_tx_ns"]) & (r["srv_tx_ns"] < r["recv_ns"]))
    assert np.all(r["req_bytes"] == 200) and np.all(r["resp_bytes"] == 300)
    assert np.all(r["tos_sent"] == 0xb8) and np.all(r["tos_srv"] == 0xb8) and np.all(r["tos_cli"] == 0xb8)
    assert sorted(r["arrival"]) == list(range(N))
    a = stats.analyze(s)
    assert a.counts["received"] == N and a.counts["duplicates"] == 0


def _queued_bytes(c, pod, port: int) -> int:
    """Bytes waiting in the receive queue of the pod's UDP socket on ``port`` (ss Recv-Q)."""
    out = c.exec_in(pod, ["ss", "-u", "-l", "-n", "-H", f"sport = :{port}"]).decode().split()
    return int(out[1]) if len(out) > 1 else 0


def test_replies_after_the_wait_are_late_not_received(path):
    """The responder is stopped (SIGSTOP) until requests sent more than ``wait`` ago queue up at it,
    then resumed: its replies to those come back after their rows were final, so they are late,
    not received; every request is either received or late, and the responder saw them all."""
    c, srv, cli, port = path
    pids = pids_in_netns(c.netns_of(srv))
    assert pids, "no responder process in the server pod's namespace"
    spec = ProbeSpec("udp", srv.ip, port, count=600, interval=0.001, req_bytes=1000, wait=0.02, sender="native")
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        with ThreadPoolExecutor(1) as pool:
            run = pool.submit(c.probe, cli, spec)
            deadline = time.monotonic() + 20
            while _queued_bytes(c, srv, port) < 150_000:   # >= 150 kB: >= 60 requests, the oldest >= 60 ms
                assert time.monotonic() < deadline and not run.done(), "requests never queued at the responder"
                time.sleep(0.005)
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
            s = run.result()
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    a = stats.analyze(s)
    late = s.meta["late_responses"]
    print(f"late {late}, received {a.counts['received']}")
    assert late >= 20 and a.counts["received"] + late == spec.count, (a.counts, s.meta)
    assert np.all(s.rows["srv_seen"] == 1)    # the loss of the late ones is "late", not the path's


def test_rows_are_copied_across_stream_blocks():
    rows = stream.RowStream(10, settle_ns=0, block=4, keep_all=True)
    got = empty(7)
    got["seq"] += 2
    got["send_ns"] = np.arange(2, 9) * 10
    udp_native._fill(rows, got, 2)
    whole = rows.finish({}).rows
    assert list(whole["send_ns"]) == [0, 0, 20, 30, 40, 50, 60, 70, 80, 0]


def test_native_sender_for_another_protocol_is_one_line():
    p = subprocess.run([sys.executable, "-m", "netslo.agent", "probe", "tcp-rr", "--target", "127.0.0.1:9",
                        "--sender", "native", "--out", "-"], capture_output=True, text=True)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "--sender" in lines[0] and "udp" in lines[0], p.stderr
    with pytest.raises(ValueError, match=r"sender: value 'native' — expected 'python' \(the compiled sender is for protocol udp only, not tcp-rr\)"):
        from netslo.traffic.probes import run
        run(ProbeSpec("tcp-rr", "127.0.0.1", 9, sender="native"))


def test_native_rows_use_kernel_stamps_inside_the_user_space_times(path):
    """As the Python sender (tests/unit/test_kernel_timestamps.py): kernel TX/RX stamps at both ends,
    none missing, each strictly inside the loop's own clock readings."""
    c, srv, cli, port = path
    s = c.probe(cli, ProbeSpec("udp", srv.ip, port, count=N, interval=INTERVAL, req_bytes=64, resp_bytes=64,
                               wait=0.5, sender="native"))
    m = s.meta
    assert (m["timestamps"], m["server_timestamps"], m["kernel_tx_missing"], m["kernel_rx_missing"]) == \
        ("kernel", "kernel", 0, 0)
    r = s.rows[s.rows["recv_ns"] >= 0]
    assert len(r) == N
    assert np.all(r["send_app_ns"] < r["send_ns"]) and np.all(r["recv_ns"] < r["recv_app_ns"])
    assert np.all(r["send_app_ns"] >= r["sched_ns"])
    a = stats.analyze(s)
    assert a.get("rtt.p50").value < a.get("rtt_app.p50").value
