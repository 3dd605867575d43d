"""Kernel receive timestamps of the probe's UDP requests, captured where they arrive.

    python benchmarks/kernel_rx_stamps.py IFACE PORT COUNT TIMEOUT_S   (in the receiver's namespace)

An AF_PACKET socket on IFACE with SO_TIMESTAMPNS: the kernel stamps each packet as the device
receives it; on a veth pair that is inside the sender's send() call, so the stamps show when the
requests really left, read by the kernel instead of the sender. Prints one line "seq stamp_ns" per
netslo UDP request to PORT (CLOCK_REALTIME: only differences are used), until COUNT or TIMEOUT_S.
"""

import socket
import struct
import sys
import time

ETH_P_IP = 0x0800
SO_TIMESTAMPNS = 35
HDR_SEQ = 4 + 4 + 8         # offset of seq in netslo's UDP header


def main() -> None:
    iface, port, count, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    s.setsockopt(socket.SOL_SOCKET, 33, 256 * 1024 * 1024)     # SO_RCVBUFFORCE: no drops while behind
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind((iface, ETH_P_IP))
    s.settimeout(0.2)
    print("ready", flush=True)
    out, end = [], time.monotonic() + timeout
    while len(out) < count and time.monotonic() < end:
        try:
            data, anc, _f, _a = s.recvmsg(128, 64)
        except socket.timeout:
            continue
        ihl = (data[0] & 0x0F) * 4
        if data[9] != socket.IPPROTO_UDP or struct.unpack_from("!H", data, ihl + 2)[0] != port:
            continue
        payload = data[ihl + 8:]
        if payload[:4] != b"NSL1" or payload[4] != 1:
            continue
        stamp = next((struct.unpack("qq", d) for lvl, typ, d in anc if typ == SO_TIMESTAMPNS), None)
        if stamp:
            out.append(f"{struct.unpack_from('!Q', payload, HDR_SEQ)[0]} {stamp[0] * 1_000_000_000 + stamp[1]}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
