"""MQTT probe (paho-mqtt 2.x): publish -> broker -> subscribe latency at QoS 0, 1 or 2.

One process holds two MQTT 3.1.1 clients on two TCP connections to the broker: a subscriber on a
topic unique to the run and a publisher that publishes ``req_bytes`` messages (header + random
bytes) on an open-loop schedule. Both clients are driven by one thread with ``select`` (paho's
``loop_read``/``loop_write``/``loop_misc``), so a publish is written in the ``publish()`` call.

Row fields (see ``netslo.stats.samples``): ``send_ns`` just before ``publish()``; ``recv_ns`` when the
subscriber's ``on_message`` ran for the first copy (QoS 2: after PUBREL, as paho delivers it);
``dups`` extra copies; ``srv_seen`` 1 when the broker acknowledged the publish (PUBACK for QoS 1,
PUBCOMP for QoS 2), -1 otherwise (QoS 0 has no acknowledgement); ``resp_bytes`` bytes delivered.
So ``loss_up`` = never acknowledged by the broker, ``loss_down`` = acknowledged but not delivered.
Both ends of one flow share this process's clock: the latency is exact and crosses the network
twice (client -> broker -> client), like an RTT.

``meta['nodelay']`` records TCP_NODELAY as read back from both client sockets; the broker's side is
checked by the provider (``tcpinfo.nodelay_of_process``).
"""

from __future__ import annotations

import os
import select
import struct

from netslo.core.errors import InfrastructureError, SpecError
from netslo.stats import samples, stream
from netslo.traffic import payload, tcpinfo
from netslo.traffic.clock import now_ns, pin_cpu, set_timer_slack
from netslo.traffic.probes import ProbeSpec
from netslo.traffic.sockopts import set_nodelay, set_tos

MAX_MQTT_PAYLOAD = 268_435_455 - 1024
WARMUP_SEQ = 2 ** 64 - 1
CONNECT_TIMEOUT_S = 10.0


def qos_of(protocol: str) -> int:
    """'mqtt-qos1' -> 1."""
    if protocol not in ("mqtt-qos0", "mqtt-qos1", "mqtt-qos2"):
        raise SpecError("protocol", protocol, "mqtt-qos0, mqtt-qos1 or mqtt-qos2")
    return int(protocol[-1])


class Ledger:
    """Accounting of one run: which publish (seq) was acknowledged, delivered, duplicated.

    ``rows`` is a ``samples.empty(n)`` array or a ``stream.RowStream`` filled in place (a row the
    stream already wrote is None: an answer for it is late and changes nothing); messages of another
    run or with a seq outside 0..n-1 are counted in ``foreign`` and otherwise ignored."""

    def __init__(self, rows, run: int, qos: int):
        self.rows, self.run, self.qos = rows, run, qos
        self.mid_to_seq: dict[int, int] = {}
        self.arrivals = 0
        self.duplicates = 0
        self.acked = 0
        self.foreign = 0
        self.warm = False

    def published(self, seq: int, mid: int) -> None:
        if self.qos > 0:
            self.mid_to_seq[mid] = seq

    def acknowledged(self, mid: int) -> None:
        """PUBACK (QoS 1) / PUBCOMP (QoS 2) for ``mid``: the broker has the message."""
        seq = self.mid_to_seq.pop(mid, None)
        if seq is not None and seq != WARMUP_SEQ:
            row = self.rows[seq]
            if row is not None:
                row["srv_seen"] = 1
            self.acked += 1

    def delivered(self, data: bytes, t_ns: int) -> None:
        try:
            run, seq, _send_ns = payload.parse_mqtt_message(data)
        except payload.PayloadError:
            self.foreign += 1
            return
        if run != self.run:
            self.foreign += 1
            return
        if seq == WARMUP_SEQ:
            self.warm = True
            return
        if seq >= len(self.rows):
            self.foreign += 1
            return
        row = self.rows[seq]
        if row is None:
            return
        if row["recv_ns"] >= 0:
            row["dups"] += 1
            self.duplicates += 1
            return
        row["recv_ns"], row["resp_bytes"], row["arrival"] = t_ns, len(data), self.arrivals
        self.arrivals += 1

    def complete(self, sent: int) -> bool:
        """Every sent message delivered (and, for QoS > 0, acknowledged)."""
        return self.arrivals >= sent and (self.qos == 0 or not self.mid_to_seq)

    def summary(self) -> dict:
        return {"qos": self.qos, "delivered": self.arrivals, "acked": self.acked,
                "duplicates": self.duplicates, "foreign": self.foreign}


def _client(role: str, run: int, ledger: Ledger):
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion
    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"netslo-{role}-{run:08x}",
                    protocol=mqtt.MQTTv311, clean_session=True)
    c.max_inflight_messages_set(0)  # 0 = no limit: open loop must not be throttled by the client
    c.max_queued_messages_set(0)
    c.user_data_set({"connected": False, "subscribed": False})
    c.on_connect = lambda cl, ud, flags, rc, props: ud.update(connected=not rc.is_failure, rc=str(rc))
    c.on_subscribe = lambda cl, ud, mid, rcs, props: ud.update(subscribed=all(not r.is_failure for r in rcs))
    if role == "pub":
        c.on_publish = lambda cl, ud, mid, rc, props: ledger.acknowledged(mid)
    else:
        c.on_message = lambda cl, ud, msg: ledger.delivered(msg.payload, now_ns())
    return c


def _pump(clients, timeout: float) -> None:
    """One select round over the clients' sockets; paho does the reading and writing."""
    socks = {c.socket(): c for c in clients if c.socket() is not None}
    if not socks:
        raise InfrastructureError("mqtt: every connection to the broker is closed")
    wl = [s for s, c in socks.items() if c.want_write()]
    r, w, _ = select.select(list(socks), wl, [], max(timeout, 0.0))
    for s in w:
        socks[s].loop_write()
    for s in r:
        socks[s].loop_read()


def _wait(clients, done, what: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    deadline = now_ns() + int(timeout * 1e9)
    while not done():
        if now_ns() > deadline:
            raise InfrastructureError(f"mqtt: {what} did not happen within {timeout:.0f} s")
        _pump(clients, 0.05)


def run(spec: ProbeSpec, sink=None) -> samples.SampleSet:
    """Run the MQTT probe; QoS from the protocol name (mqtt-qos0/1/2). Rows go to ``sink`` in chunks
    as they become final (``netslo.stats.stream``); returns the set (metadata only for a file sink)."""
    qos = qos_of(spec.protocol)
    if not payload.MQTT_MSG.size <= spec.req_bytes <= MAX_MQTT_PAYLOAD:
        raise SpecError("--req-size", spec.req_bytes, f"{payload.MQTT_MSG.size}..{MAX_MQTT_PAYLOAD} bytes for mqtt")
    pin_cpu(spec.cpu)
    set_timer_slack(1)
    n = spec.count
    rows = stream.RowStream(n, settle_ns=int(spec.wait * 1e9), sink=sink,
                            defaults={"req_bytes": spec.req_bytes, "tos_sent": spec.tos})
    run_id = struct.unpack("!I", os.urandom(4))[0]
    topic = f"netslo/{run_id:08x}/latency"
    ledger = Ledger(rows, run_id, qos)
    sub, pub = _client("sub", run_id, ledger), _client("pub", run_id, ledger)
    clients = (sub, pub)
    meta = spec.meta()
    try:
        for c in clients:
            c.connect(spec.host, spec.port, keepalive=60)
            set_nodelay(c.socket(), spec.nodelay)
            set_tos(c.socket(), spec.tos)
        _wait(clients, lambda: all(c.user_data_get()["connected"] for c in clients), "CONNACK")
        meta["nodelay"] = {"publisher": tcpinfo.nodelay(pub.socket()), "subscriber": tcpinfo.nodelay(sub.socket())}
        sub.subscribe(topic, qos=qos)
        _wait(clients, lambda: sub.user_data_get()["subscribed"], f"SUBACK for {topic} at QoS {qos}")
        pub.publish(topic, payload.mqtt_message(run_id, WARMUP_SEQ, now_ns(), spec.req_bytes), qos=qos)
        _wait(clients, lambda: ledger.warm, "warm-up delivery")

        interval_ns = spec.interval_ns
        start = now_ns() + 20_000_000
        seq, deadline, last_misc = 0, None, now_ns()
        while True:
            t = now_ns()
            if seq < n and t >= start + seq * interval_ns:
                row = rows[seq]
                row["sched_ns"] = start + seq * interval_ns
                row["send_ns"] = sent = now_ns()
                if seq % stream.RETIRE_EVERY == 0:
                    rows.retire(sent)
                info = pub.publish(topic, payload.mqtt_message(run_id, seq, sent, spec.req_bytes), qos=qos)
                ledger.published(seq, info.mid)
                seq += 1
                continue
            if seq >= n:
                if deadline is None:
                    deadline = t + int(spec.wait * 1e9)
                if t >= deadline or ledger.complete(n):
                    break
                timeout = (deadline - t) / 1e9
            else:
                timeout = (start + seq * interval_ns - t) / 1e9
            _pump(clients, min(timeout, 1.0))
            if t - last_misc > 1_000_000_000:
                for c in clients:
                    c.loop_misc()
                last_misc = t
        meta["mqtt"] = ledger.summary()
    finally:
        for c in clients:
            try:
                c.disconnect()
                c.loop_write()
            except Exception:
                pass
    return rows.finish(meta)
