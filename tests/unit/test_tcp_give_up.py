"""tcp-crr with ``give_up`` (the change studies' probe), on loopback with an in-thread responder:
unanswered connections are given up on time, and descriptors above FD_SETSIZE (1024) work."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from netslo.core.errors import SpecError
from netslo.traffic import wire
from netslo.traffic.probes import ProbeSpec, check_give_up, check_source_ports, tcp
from netslo.traffic.responders import tcp as tcp_responder

from .local_responder import serving


def test_descriptors_above_fd_setsize_do_not_stop_the_probe():
    """select() refuses a descriptor >= 1024 ('filedescriptor out of range', seen on kind + Cilium with
    hundreds of connections pending); the probe polls instead."""
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with serving(tcp_responder.serve) as port:
            s = tcp.run(ProbeSpec("tcp-crr", "127.0.0.1", port, count=200, interval=0.001, req_bytes=64,
                                  resp_bytes=64, wait=0.3, give_up=0.2))
    finally:
        for fd in held:
            os.close(fd)
    assert (s.rows["recv_ns"] >= 0).all()


def test_unanswered_connections_are_given_up_and_lost():
    """A listener that never accepts (backlog full after a few): the rest stay unanswered; the probe
    ends after its schedule + wait, each such request lost."""
    with socket.socket() as lst:
        lst.bind(("127.0.0.1", 0))
        lst.listen(0)
        s = tcp.run(ProbeSpec("tcp-crr", "127.0.0.1", lst.getsockname()[1], count=100, interval=0.002,
                              req_bytes=64, resp_bytes=64, wait=0.3, give_up=0.05))
    assert (s.rows["recv_ns"] < 0).all() and np.count_nonzero(s.rows["send_app_ns"] >= 0) == 100
    # the few the backlog took were written and not answered; the rest's SYNs were never answered
    given = s.meta["given_up"]
    assert sum(given.values()) == 100 and given["connecting"] > 50 and given["unanswered"] >= 1, given


@pytest.mark.parametrize("protocol,give_up,expected", [
    ("udp", 0.1, "no value for udp"), ("tcp-crr", 1.0, "(0, 1s)"), ("tcp-crr", 0.0, "(0, 1s)")])
def test_bad_give_up_is_one_line(protocol, give_up, expected):
    with pytest.raises(SpecError, match=r"give_up: value .* — expected") as e:
        check_give_up(protocol, give_up)
    assert expected in str(e.value) and "\n" not in str(e.value)


def _peer_ports(count: int, source_ports: str) -> list[int]:
    """Source ports of a tcp-crr probe's connections (give_up as in the studies), in order, as a
    listener on loopback saw them."""
    seen: list[int] = []
    with socket.socket() as lst:
        lst.bind(("127.0.0.1", 0))
        lst.listen(count)
        tcp.run(ProbeSpec("tcp-crr", "127.0.0.1", lst.getsockname()[1], count=count, interval=0.001,
                          req_bytes=64, resp_bytes=64, wait=0.05, give_up=0.2, source_ports=source_ports))
        lst.settimeout(0.5)
        for _ in range(count):
            c, addr = lst.accept()
            seen.append(addr[1])
            c.close()
    return seen


def test_in_turn_connections_take_source_ports_one_after_another():
    """Left to the kernel (the latency scenarios) ports are not consecutive; in turn (the change
    studies) they follow one another, so a tuple comes back only after the range."""
    ports = tcp.SourcePorts()
    steps = np.diff(_peer_ports(40, "in-turn")) % (ports.hi - ports.lo + 1)
    # (a step above 1: a port another socket of this host held was skipped)
    assert np.all((steps >= 1) & (steps <= tcp.PORT_TRIES)) and np.median(steps) == 1, steps
    assert not np.all(np.diff(_peer_ports(40, "kernel")) == 1)


@pytest.mark.parametrize("protocol,mode,expected", [
    ("tcp-crr", "random", "one of kernel, in-turn"), ("tcp-rr", "in-turn", "only tcp-crr")])
def test_bad_source_ports_is_one_line(protocol, mode, expected):
    with pytest.raises(SpecError, match=r"source_ports: value .* — expected") as e:
        check_source_ports(protocol, mode)
    assert expected in str(e.value) and "\n" not in str(e.value)
    check_source_ports("udp", "kernel")


def _free_block(size: int) -> int:
    """The first port of ``size`` free ports below the ephemeral range, where neither connect() nor
    bind(0) of another process takes one while the test runs (a block around an ephemeral port did:
    CI, 2026-11-28, its neighbour was taken by another socket)."""
    low = tcp.SourcePorts().lo
    for first in range(low - size - 100, 1024, -size):
        socks = []
        try:
            for port in range(first, first + size):
                s = socket.socket()
                socks.append(s)
                s.bind(("0.0.0.0", port))
            return first
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    pytest.fail(f"no {size} free ports below the ephemeral range {low}")


def test_source_ports_wrap_and_skip_a_port_in_use(tmp_path):
    rng = tmp_path / "range"
    first = _free_block(4)
    with socket.socket() as held:
        busy = first + 2
        held.bind(("0.0.0.0", busy))
        rng.write_text(f"{busy - 2}\t{busy + 1}\n")
        ports = tcp.SourcePorts(str(rng), start=1)          # busy - 1 first
        got = []
        for _ in range(4):
            s = socket.socket()
            ports.bind(s, socket.AF_INET)
            got.append(s.getsockname()[1])
            s.close()
    assert got == [busy - 1, busy + 1, busy - 2, busy - 1]


def _late_responder(lst: socket.socket, delay: float, stop: threading.Event) -> None:
    """Answer each connection's one request ``delay`` s after it came (a thread per connection)."""
    def answer(c: socket.socket) -> None:
        with c:
            head = b""
            while len(head) < wire.TCP_REQ.size:
                chunk = c.recv(wire.TCP_REQ.size - len(head))
                if not chunk:
                    return
                head += chunk
            _magic, seq, size, resp, tos = wire.TCP_REQ.unpack(head)
            left = size - len(head)
            while left > 0:
                left -= len(c.recv(left)) or left
            time.sleep(delay)
            with contextlib.suppress(OSError):
                c.sendall(wire.TCP_RESP.pack(wire.TCP_RESP_MAGIC, seq, 0, 0, resp, tos)
                          + bytes(resp - wire.TCP_RESP.size))
    lst.settimeout(0.1)
    while not stop.is_set():
        try:
            c, _ = lst.accept()
        except TimeoutError:
            continue
        threading.Thread(target=answer, args=(c,), daemon=True).start()


CHILD = """
import json, sys
from netslo.traffic.probes import ProbeSpec, tcp
port, give_up = int(sys.argv[1]), float(sys.argv[2])
print("go", flush=True)
s = tcp.run(ProbeSpec("tcp-crr", "127.0.0.1", port, count=100, interval=0.01, req_bytes=64, resp_bytes=64,
                      wait=0.5, give_up=give_up))
print(json.dumps({"lost": int((s.rows["recv_ns"] < 0).sum())}), flush=True)
"""


@pytest.mark.parametrize("give_up,lost", [(0.15, (0, 1)), (0.05, (100, 100))], ids=["in-time", "too-late"])
def test_a_starved_probe_judges_an_answer_by_when_it_came_not_when_it_looked(give_up, lost):
    """The probe stopped (SIGSTOP) for 0.3 s while answers 80 ms late come in (on two cores a CNI agent
    starting held the client back 0.3-0.45 s: kind + Calico, 2026-12-03): an answer that reached its
    kernel before its give-up is answered, however late the probe reads it; one that came after stays
    lost. The probe judged by when it read: without the RX-stamp check the too-late case counted 5 of
    100 answered (the ones waiting when the stopped poll returned)."""
    stop = threading.Event()
    with socket.socket() as lst:
        lst.bind(("127.0.0.1", 0))
        lst.listen(256)
        srv = threading.Thread(target=_late_responder, args=(lst, 0.08, stop), daemon=True)
        srv.start()
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(lst.getsockname()[1]), str(give_up)],
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "go"
            time.sleep(0.5)                 # the schedule runs from ~20 ms after "go", for 1 s
            child.send_signal(signal.SIGSTOP)
            time.sleep(0.3)
            child.send_signal(signal.SIGCONT)
            out, _ = child.communicate(timeout=30)
        finally:
            child.kill()
            stop.set()
            srv.join(5)
    got = json.loads(out.strip().splitlines()[-1])["lost"]
    assert lost[0] <= got <= lost[1], got
