"""struct tcp_info parsing: a synthetic blob with known fields and a live loopback connection."""

import os
import socket

import pytest

from netslo.traffic import tcpinfo


def test_parse_reads_fields_at_their_offsets():
    v = [0] * 42
    v[0] = tcpinfo.TCP_ESTABLISHED
    for name, value in (("rtt", 1234), ("rttvar", 56), ("retrans", 2), ("total_retrans", 9),
                        ("snd_cwnd", 10), ("snd_mss", 1448), ("pmtu", 1500)):
        v[tcpinfo._U32[name]] = value
    v[36], v[39] = 77, 890  # segs_out, min_rtt
    info = tcpinfo.parse(tcpinfo._LAYOUT.pack(*v) + b"\0" * 40)
    assert (info.rtt, info.rttvar, info.min_rtt) == (pytest.approx(1234e-6), pytest.approx(56e-6), pytest.approx(890e-6))
    assert (info.retrans, info.total_retrans, info.snd_cwnd, info.snd_mss, info.pmtu, info.segs_out) == (2, 9, 10, 1448, 1500, 77)


def test_short_blob_names_the_size():
    with pytest.raises(ValueError, match="tcp_info: 100 bytes"):
        tcpinfo.parse(b"\0" * 100)


def test_live_connection_and_nodelay_read_back_from_another_fd():
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen()
    c = socket.create_connection(lsock.getsockname())
    s, _ = lsock.accept()
    try:
        for _ in range(20):
            c.sendall(b"x" * 100)
            s.recv(100)
        info = tcpinfo.read(c)
        assert info.state == tcpinfo.TCP_ESTABLISHED and 0 < info.rtt < 1.0 and info.pmtu > 1000
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        seen = tcpinfo.nodelay_of_process(os.getpid())
        assert seen[(c.getsockname(), c.getpeername())] is True
        assert seen[(s.getsockname(), s.getpeername())] is False
    finally:
        c.close(), s.close(), lsock.close()
