"""A probe streams its rows to the agent's --out file while it runs (loopback UDP responder in a
thread), and the live progress lines hold each chunk's exact statistics."""

import contextlib
import io
import math

import numpy as np

from benchmarks.synthetic_samples import synthetic
from netslo.agent import cli as agent
from netslo.core.units import format_duration, format_percent
from netslo.stats import soak_progress, stream
from netslo.stats.samples import SampleSet
from netslo.traffic import wire
from netslo.traffic.responders import udp as udp_responder

from .local_responder import serving


@contextlib.contextmanager
def _serving(serve, monkeypatch):
    """A responder ``serve(port, "127.0.0.1", ready=, stop=)`` in a thread, small stream blocks; the port."""
    monkeypatch.setattr(stream, "BLOCK_ROWS", 256)
    monkeypatch.setattr(stream, "RETIRE_EVERY", 64)
    with serving(serve) as port:
        yield port


def test_udp_probe_streams_chunks_to_the_out_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(stream, "BLOCK_ROWS", 512)
    monkeypatch.setattr(wire, "MAX_FIN_SEQS", 100)      # too many requests for the FIN bitmap: streamed
    out = tmp_path / "soak.npz"
    with serving(udp_responder.serve) as port:
        rc = agent.main(["probe", "udp", "--target", f"127.0.0.1:{port}", "--count", "3000", "--interval", "200us",
                         "--wait", "200ms", "--progress", "--out", str(out)])
    assert rc == 0
    s = SampleSet.load(out)
    assert len(s) == 3000 and len(s.chunks()) == 6 and "late_responses" in s.meta
    assert list(s.column("seq")) == list(range(3000))
    got = s.column("recv_ns") >= 0
    assert got.mean() > 0.5
    arrival = s.column("arrival")
    assert sorted(arrival[got]) == list(range(int(got.sum())))
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 6 and lines[0].startswith("netslo.agent: requests 0-511: rtt p50 ")


def test_progress_line_is_the_chunks_exact_statistics():
    s = synthetic(5000)
    buf = io.StringIO()
    sink = soak_progress.ProgressSink(stream.ChunkList(), out=buf)
    sink.write(s.chunks()[0])
    recv, send = s.column("recv_ns"), s.column("send_ns")
    residence = s.column("srv_tx_ns") - s.column("srv_rx_ns")     # every answered row has both stamps here
    rtt = np.sort((recv - send - residence)[recv >= 0]) * 1e-9
    p50, p99 = (format_duration(float(rtt[math.ceil(q * len(rtt)) - 1])) for q in (0.5, 0.99))
    lost = format_percent(float((recv < 0).mean()))
    assert buf.getvalue() == (f"netslo.agent: requests 0-4999: rtt p50 {p50} p99 {p99}, loss {lost} "
                              f"| so far 5000 sent, loss {lost}\n")
    assert sink.chunks == s.chunks()


def test_http_probe_streams_and_drops_finished_requests(tmp_path, monkeypatch):
    """http (keep-alive) through the agent to a file: chunks written while it runs (``late_responses``
    exists only in a streamed run), every request answered on loopback, arrival ranks a permutation."""
    from netslo.traffic.responders import http as http_responder
    out = tmp_path / "http.npz"
    with _serving(http_responder.serve, monkeypatch) as port:
        assert agent.main(["probe", "http", "--target", f"127.0.0.1:{port}", "--count", "1200", "--interval", "1ms",
                           "--wait", "300ms", "--req-size", "100", "--resp-size", "200", "--out", str(out)]) == 0
    s = SampleSet.load(out)
    assert len(s) == 1200 and len(s.chunks()) == 5 and s.meta["late_responses"] == 0
    assert list(s.column("seq")) == list(range(1200))
    got = s.column("recv_ns") >= 0
    assert got.all(), f"{(~got).sum()} of 1200 unanswered on loopback"
    assert sorted(s.column("arrival")) == list(range(1200))
    assert set(s.column("req_bytes")) == {100} and set(s.column("resp_bytes")) == {200}
    assert (s.column("recv_ns") > s.column("send_ns")).all() and (s.column("srv_rx_ns") > s.column("send_ns")).all()


def test_ws_probe_streams_and_bounds_its_tcp_info_series(tmp_path, monkeypatch):
    """ws through the agent to a file: streamed chunks, every request answered on loopback, and
    beyond TCP_INFO_MAX_ROWS requests TCP_INFO is read after every k-th answer only."""
    from netslo.traffic.probes import websocket as ws_probe
    from netslo.traffic.responders import websocket as ws_responder
    monkeypatch.setattr(ws_probe, "TCP_INFO_MAX_ROWS", 300)
    out = tmp_path / "ws.npz"
    with _serving(ws_responder.serve, monkeypatch) as port:
        assert agent.main(["probe", "ws", "--target", f"127.0.0.1:{port}", "--count", "1200", "--interval", "1ms",
                           "--wait", "300ms", "--out", str(out)]) == 0
    s = SampleSet.load(out)
    assert len(s) == 1200 and len(s.chunks()) == 5 and s.meta["late_responses"] == 0
    assert (s.column("recv_ns") >= 0).all() and sorted(s.column("arrival")) == list(range(1200))
    assert s.meta["tcp_info_stride"] == 4 and len(s.meta["tcp_info"]) == 300


def test_mqtt_probe_streams_through_the_broker(tmp_path, monkeypatch):
    """mqtt-qos1 through netslo's broker to a file: streamed chunks, every publish delivered once and
    acknowledged, the ledger's counts equal to the rows'."""
    from netslo.traffic.responders import mqtt as broker
    out = tmp_path / "mqtt.npz"
    with _serving(broker.serve, monkeypatch) as port:
        assert agent.main(["probe", "mqtt-qos1", "--target", f"127.0.0.1:{port}", "--count", "1200",
                           "--interval", "1ms", "--wait", "300ms", "--req-size", "64", "--out", str(out)]) == 0
    s = SampleSet.load(out)
    assert len(s) == 1200 and len(s.chunks()) == 5 and s.meta["late_responses"] == 0
    assert (s.column("recv_ns") >= 0).all() and (s.column("srv_seen") == 1).all()
    assert s.meta["mqtt"] == {"qos": 1, "delivered": 1200, "acked": 1200, "duplicates": 0, "foreign": 0}
