"""Hostile traffic generator, run inside a pod namespace by test_hostile_input.py (bounded in time).

    python hostile_client.py TARGET_IP SECONDS SEED

UDP: random bytes, truncated headers, our magic with random flows / huge seqs / FIN floods,
oversize datagrams asking for maximal answers, scapy-crafted bad checksums and lone IP fragments.
TCP: garbage, truncated and oversize headers, idle (slowloris) connections.
HTTP: malformed request lines, bad X-Resp-Bytes values, oversized bodies announced but not sent.
"""

import random
import socket
import sys
import time

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])
from netslo.traffic import wire  # noqa: E402

ip, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
UDP, TCP, HTTP = 7000, 7001, 7080
deadline = time.monotonic() + seconds
sent = {"udp": 0, "scapy": 0, "tcp": 0, "http": 0}


def udp_blob():
    kind = rng.randrange(6)
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 300))
    if kind == 1:
        return wire.pack_udp(wire.UDP_REQ, rng.getrandbits(64), rng.getrandbits(32))[:rng.randrange(1, wire.UDP_HDR.size)]
    if kind == 2:  # our magic, random flow, huge or random seq: flow-table pressure
        return wire.pack_udp(wire.UDP_REQ, rng.getrandbits(64), rng.choice([rng.getrandbits(64), wire.MAX_FIN_SEQS - 1]),
                             resp_bytes=rng.getrandbits(32))
    if kind == 3:
        return wire.pack_udp(wire.UDP_FIN, rng.getrandbits(64), 0)
    if kind == 4:  # header with random type/flags
        return b"NSL1" + rng.randbytes(wire.UDP_HDR.size - 4)
    return wire.pack_udp(wire.UDP_REQ, rng.getrandbits(64), 1, resp_bytes=wire.MAX_UDP_PAYLOAD, size=wire.MAX_UDP_PAYLOAD)


def scapy_burst():
    from scapy.all import IP, Raw, fragment, send  # imported inside the pod namespace
    from scapy.all import UDP as SUDP
    pkts = [IP(dst=ip) / SUDP(dport=UDP, sport=rng.randrange(1024, 65535), chksum=rng.getrandbits(16)) / Raw(udp_blob()),
            IP(dst=ip, ihl=rng.choice([5, 6]), flags="MF", frag=rng.randrange(0, 100)) / SUDP(dport=UDP) / Raw(rng.randbytes(64)),
            fragment(IP(dst=ip) / SUDP(dport=UDP) / Raw(wire.pack_udp(wire.UDP_REQ, 7, 7, size=3000)), fragsize=512)[0]]
    send(pkts, verbose=False)
    sent["scapy"] += len(pkts)


def tcp_attack():
    s = socket.create_connection((ip, TCP), timeout=1)
    kind = rng.randrange(4)
    if kind == 0:
        s.sendall(rng.randbytes(rng.randrange(1, 2000)))
    elif kind == 1:
        s.sendall(wire.TCP_REQ.pack(wire.TCP_REQ_MAGIC, 1, 2**32 - 1, 64, 0))         # oversize request
    elif kind == 2:
        s.sendall(wire.TCP_REQ.pack(wire.TCP_REQ_MAGIC, 1, 1000, 2**31, 0)[:10])       # truncated header
    else:
        idle.append(s)                                                                 # slowloris
        return
    s.close()


def http_attack():
    s = socket.create_connection((ip, HTTP), timeout=0.2)
    s.sendall(rng.choice([
        b"GARBAGE\r\n\r\n",
        b"POST /rr HTTP/1.1\r\nHost: x\r\nX-Resp-Bytes: -5\r\nContent-Length: 0\r\n\r\n",
        b"POST /rr HTTP/1.1\r\nHost: x\r\nX-Resp-Bytes: 99999999999\r\nContent-Length: 0\r\n\r\n",
        b"POST /rr HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\nabc",
        b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n",
        rng.randbytes(500)]))
    try:
        s.recv(4096)
    except OSError:
        pass
    s.close()


idle = []
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.setblocking(False)
while time.monotonic() < deadline:
    for _ in range(200):
        try:
            u.sendto(udp_blob(), (ip, UDP))
            sent["udp"] += 1
        except OSError:
            pass
    for attack, key in ((tcp_attack, "tcp"), (http_attack, "http")):
        try:
            attack()
            sent[key] += 1
        except OSError:
            pass
    if rng.random() < 0.2:
        scapy_burst()
    try:
        while True:
            u.recv(70000)
    except OSError:
        pass
print(sent, len(idle), flush=True)
