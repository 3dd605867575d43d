"""A request/response client that writes each request as TWO writes (header, then body), as many real
clients do (HTTP/1.1 headers then body, length-prefixed RPC). With Nagle on, the body waits for the
ACK of the header; a peer in interactive mode delays that ACK (it has nothing to send until the body
arrives): the classic Nagle x delayed-ACK stall. Speaks the netslo TCP wire format to the tcp
responder; writes raw samples (npz) to stdout like the agent.

    python -m tests.integration.splitwrite_client HOST PORT COUNT INTERVAL_S REQ_BYTES NODELAY(0|1)
"""

import socket
import sys
import time

from netslo.stats import samples
from netslo.traffic import wire
from netslo.traffic.clock import now_ns
from netslo.traffic.sockopts import set_nodelay

WARMUP = 30


def _exchange(sock, seq, req_bytes):
    head = wire.TCP_REQ.pack(wire.TCP_REQ_MAGIC, seq, req_bytes, wire.TCP_RESP.size, 0)
    sock.sendall(head)
    sock.sendall(bytes(req_bytes - len(head)))
    got = b""
    while len(got) < wire.TCP_RESP.size:
        chunk = sock.recv(wire.TCP_RESP.size - len(got))
        if not chunk:
            raise ConnectionError("responder closed the connection")
        got += chunk
    return wire.TCP_RESP.unpack(got)


def main(argv):
    host, port, count, interval, req_bytes, nodelay = argv[0], int(argv[1]), int(argv[2]), float(argv[3]), \
        int(argv[4]), argv[5] == "1"
    sock = socket.create_connection((host, port), timeout=5)
    set_nodelay(sock, nodelay)
    for i in range(WARMUP):  # leave quick-ACK mode: the peer has become an interactive connection
        _exchange(sock, 2 ** 62 + i, req_bytes)
    rows = samples.empty(count)
    rows["req_bytes"] = req_bytes
    start = now_ns() + 10_000_000
    for seq in range(count):
        sched = start + int(seq * interval * 1e9)
        while now_ns() < sched:
            time.sleep(max(0.0, (sched - now_ns()) / 1e9))
        rows[seq]["sched_ns"], rows[seq]["send_ns"] = sched, now_ns()
        _magic, _seq, rx, tx, size, _tos = _exchange(sock, seq, req_bytes)
        rows[seq]["recv_ns"], rows[seq]["srv_rx_ns"], rows[seq]["srv_tx_ns"] = now_ns(), rx, tx
        rows[seq]["resp_bytes"], rows[seq]["srv_seen"], rows[seq]["arrival"] = size, 1, seq
    sock.close()
    meta = {"protocol": "tcp-rr", "split_writes": True, "nodelay": nodelay, "interval": interval}
    sys.stdout.buffer.write(samples.SampleSet(rows, meta).to_bytes())


if __name__ == "__main__":
    main(sys.argv[1:])
