"""Kernel timestamps in the UDP probe and responder (loopback, responder in a thread): the rows use
them and say so, each request's kernel RTT lies inside its user-space one, and a kernel or path
that gives none falls back with the metadata saying which timestamps were used."""

import socket

import numpy as np
import pytest

from netslo.report.series import series
from netslo.stats import analysis as stats
from netslo.stats.order_stats import seconds
from netslo.traffic import kstamps
from netslo.traffic.probes import ProbeSpec, tcp, udp, udp_native
from netslo.traffic.responders import tcp as tcp_responder
from netslo.traffic.responders import udp as udp_responder

from .local_responder import serving

N = 400


def _responder(module=udp_responder):
    """``module``'s responder on a free loopback port (a context manager yielding the port)."""
    return serving(module.serve)


def _probe(port: int, sender: str = "python"):
    spec = ProbeSpec("udp", "127.0.0.1", port, count=N, interval=0.0005, req_bytes=64, resp_bytes=64, wait=0.3,
                     sender=sender)
    return (udp_native if sender == "native" else udp).run(spec)


def _answered(s):
    r = s.rows
    return r[r["recv_ns"] >= 0]


@pytest.mark.parametrize("sender", ["python", "native"])
def test_rows_use_kernel_stamps_inside_the_user_space_times(sender):
    """Fails when the kernel's stamps are not used, silently or not: the source, the responder's,
    no answered request without its stamps, every stamp strictly inside the user-space times."""
    if sender == "native" and udp_native.sender()[0] is None:
        pytest.skip(f"native sender: {udp_native.sender()[1]}")
    with _responder() as port:
        s = _probe(port, sender)
    m = s.meta
    assert (m["timestamps"], m["server_timestamps"]) == (kstamps.KERNEL, kstamps.KERNEL)
    assert m["kernel_tx_missing"] == 0 and m["kernel_rx_missing"] == 0
    r = _answered(s)
    assert len(r) >= 0.95 * N
    assert np.all(r["send_app_ns"] < r["send_ns"]) and np.all(r["recv_ns"] < r["recv_app_ns"])
    # one clock on both ends: client TX < responder RX <= responder TX < client RX
    assert np.all((r["send_ns"] < r["srv_rx_ns"]) & (r["srv_rx_ns"] <= r["srv_tx_ns"]) & (r["srv_tx_ns"] < r["recv_ns"]))
    a = stats.analyze(s)
    assert a.get("rtt.p50").value < a.get("rtt_app.p50").value
    assert a.get("rtt.max").value <= a.get("rtt_app.max").value and a.get("rtt.p50").n == len(r)
    # rtt: kernel TX to kernel RX less the responder's kernel RX to its send (irtt's definition)
    assert np.array_equal(series(s, "rtt"), seconds((r["recv_ns"] - r["send_ns"]) - (r["srv_tx_ns"] - r["srv_rx_ns"])))


def test_timer_error_stays_the_user_space_send_against_the_schedule():
    with _responder() as port:
        s = _probe(port)
    r = s.rows[s.rows["send_ns"] >= 0]
    te = stats.analyze(s).get("timer_error.max").value
    assert te == pytest.approx(float((r["send_app_ns"] - r["sched_ns"]).max()) * 1e-9, abs=1e-12)


def test_a_kernel_without_tx_stamps_falls_back_to_rx_stamps_and_says_so(monkeypatch):
    real = kstamps.enable
    monkeypatch.setattr(kstamps, "enable", lambda sock, tx=True: real(sock, tx=False))   # e.g. SO_TIMESTAMPNS only
    with _responder() as port:
        s = _probe(port)
    assert (s.meta["timestamps"], s.meta["server_timestamps"]) == (kstamps.KERNEL_RX, kstamps.KERNEL)
    r = _answered(s)
    assert np.array_equal(r["send_ns"], r["send_app_ns"]) and np.all(r["recv_ns"] < r["recv_app_ns"])


def test_a_kernel_without_stamps_falls_back_to_user_space_and_says_so(monkeypatch):
    monkeypatch.setattr(kstamps, "enable", lambda sock, tx=True: kstamps.USER)
    with _responder() as port:
        s = _probe(port)
    assert (s.meta["timestamps"], s.meta["server_timestamps"]) == (kstamps.USER, kstamps.USER)
    r = _answered(s)
    assert np.array_equal(r["send_ns"], r["send_app_ns"]) and np.array_equal(r["recv_ns"], r["recv_app_ns"])
    # one clock point per event: rtt is rtt_app less the responder's residence, request by request
    app = (r["recv_app_ns"] - r["send_app_ns"]) - (r["srv_tx_ns"] - r["srv_rx_ns"])
    assert np.array_equal(series(s, "rtt"), seconds(app))
    assert stats.analyze(s).get("rtt_app.p50").value > stats.analyze(s).get("rtt.p50").value


def test_a_path_without_tx_stamps_is_found_on_the_warm_up(monkeypatch):
    """SO_TIMESTAMPING accepted but no TX stamp ever comes (a driver that does not stamp): the
    warm-up flow moves the socket to kernel-rx before the measured schedule."""
    monkeypatch.setattr(kstamps, "read_tx", lambda sock: [])
    with _responder() as port:
        s = _probe(port)
    assert s.meta["timestamps"] == kstamps.KERNEL_RX and s.meta["kernel_tx_missing"] == 0
    r = _answered(s)
    assert np.array_equal(r["send_ns"], r["send_app_ns"]) and np.all(r["recv_ns"] < r["recv_app_ns"])


def test_tx_stamps_paired_with_the_wrong_requests_are_refused_and_counted(monkeypatch):
    """Each TX stamp reported under the previous request's OPT_ID key (as if the kernel had counted
    one more datagram than the probe): the stamps come after those requests' answers, so every one
    is refused, already on the warm-up flow, which moves the socket to kernel-rx: the rows keep
    their user-space send times and the metadata says so."""
    real = kstamps.read_tx
    monkeypatch.setattr(kstamps, "read_tx", lambda sock: [(key - 1, stamp) for key, stamp in real(sock) if key])
    with _responder() as port:
        s = _probe(port)
    r = _answered(s)
    assert s.meta["timestamps"] == kstamps.KERNEL_RX and len(r) > 0.9 * N
    assert np.array_equal(r["send_ns"], r["send_app_ns"]) and np.all(r["send_ns"] < r["recv_ns"])


def test_a_stamp_keyed_to_an_earlier_request_is_refused_even_before_its_answer_is_read(monkeypatch):
    """The stall case of the test above, made deterministic: the probe sent requests 0..2 and has read
    no answer yet (a stall delayed its receive loop), and every TX stamp comes under the previous key.
    Each stamp lies after the next request's user-space send time, so none can be its row's: refused.
    The same stamps under their own keys are taken."""
    from netslo.stats.samples import empty

    class Clock:
        def refresh(self):
            pass

        def to_mono(self, t):
            return t

    def fresh():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            st = udp.Stamps(sock)
        if st.source != kstamps.KERNEL:
            pytest.skip(f"no kernel TX stamps here ({st.source})")
        st.clock = Clock()
        rows = empty(3)
        rows["send_app_ns"] = [1_000, 2_000, 3_000]
        rows["send_ns"] = rows["send_app_ns"]
        rows["recv_ns"] = -1                       # no answer read yet
        for i in range(3):
            st.sent(rows[i])
        return st, rows

    own = [(0, 1_010), (1, 2_010), (2, 3_010)]     # each stamp 10 ns into its own send
    st, rows = fresh()
    monkeypatch.setattr(kstamps, "read_tx", lambda sock: list(own))
    st.read_tx()
    assert list(rows["send_ns"]) == [1_010, 2_010, 3_010] and st.tx == 3
    st, rows = fresh()
    monkeypatch.setattr(kstamps, "read_tx", lambda sock: [(k - 1, t) for k, t in own if k])
    st.read_tx()
    assert list(rows["send_ns"]) == [1_000, 2_000, 3_000] and st.tx == 0


class _Refusing:
    def __init__(self, refuse):
        self.refuse, self.set = refuse, []

    def setsockopt(self, level, opt, value):
        if opt in self.refuse:
            raise PermissionError(1, "refused")
        self.set.append((opt, value))


@pytest.mark.parametrize("refuse, source", [((), kstamps.KERNEL),
                                            ((kstamps.SO_TIMESTAMPING,), kstamps.KERNEL_RX),
                                            ((kstamps.SO_TIMESTAMPING, kstamps.SO_TIMESTAMPNS), kstamps.USER)])
def test_enable_reports_what_the_kernel_accepted(refuse, source):
    sock = _Refusing(refuse)
    assert kstamps.enable(sock) == source
    assert all(opt not in refuse for opt, _ in sock.set)


@pytest.mark.parametrize("protocol, source", [("tcp-rr", kstamps.KERNEL), ("tcp-crr", kstamps.KERNEL_RX)])
def test_tcp_probes_use_kernel_stamps_inside_the_user_space_times(protocol, source):
    """tcp-rr: TX stamp of the request's last byte (OPT_ID counts bytes) and RX stamp of the read
    that completed the answer; tcp-crr: RX stamps (send_ns stays before connect)."""
    with _responder(tcp_responder) as port:
        s = tcp.run(ProbeSpec(protocol, "127.0.0.1", port, count=N, interval=0.001, req_bytes=100, resp_bytes=100,
                              wait=0.3))
    m = s.meta
    assert (m["timestamps"], m["server_timestamps"], m["kernel_tx_missing"], m["kernel_rx_missing"]) == \
        (source, kstamps.KERNEL, 0, 0)
    r = _answered(s)
    assert len(r) >= 0.95 * N and np.all(r["recv_ns"] < r["recv_app_ns"])
    assert np.all((r["srv_rx_ns"] <= r["srv_tx_ns"]) & (r["srv_tx_ns"] < r["recv_ns"]))
    if source == kstamps.KERNEL:
        assert np.all(r["send_app_ns"] < r["send_ns"]) and np.all(r["send_ns"] < r["recv_ns"])
    else:
        assert np.array_equal(r["send_ns"], r["send_app_ns"])
    a = stats.analyze(s)
    assert a.get("rtt.p50").value < a.get("rtt_app.p50").value
