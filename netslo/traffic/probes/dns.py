"""Open-loop DNS lookup probe: what a pod's stub resolver (glibc getaddrinfo) does, timed per lookup.

Lookup ``seq`` starts at ``start + seq*interval`` whatever happened to earlier ones. Each lookup
opens its own UDP socket (a fresh source port, as glibc does per lookup) and, per ``qtypes``:
  parallel    A and AAAA sent back to back over that one socket (glibc's default for AF_UNSPEC;
              the pair whose second packet can lose the conntrack insertion race)
  sequential  A, then AAAA once A is answered (glibc ``options single-request``)
  a, aaaa     one query type only
A query unanswered after ``timeout`` s is sent again (same ID) up to ``attempts`` sends in all
(glibc ``options timeout:N attempts:N``; glibc's defaults are 5 s and 2). Every expired wait is
counted per type: a retry is what produces the multi-second tail, and it is recorded, never hidden.

Search expansion (``search``, ``ndots``): the names ``dnswire.candidates`` gives are tried in order;
a candidate is done when each of its queries has an answer or used up its attempts; it ends the
lookup as a success when one answer is NOERROR with an address of its type (the other family's
NODATA or timeout does not fail it: getaddrinfo returns what it got, after waiting). A candidate
whose queries all answered without an address (NXDOMAIN, NODATA, SERVFAIL) moves to the next; a
query without any answer after all attempts ends the lookup as failed (TIMEOUT).

One row per lookup (``netslo.stats.samples``): send_ns = the first query's send (user space, just before
``send``), recv_ns = when the last answer the lookup needed arrived (user space, after ``recv``) or,
when it succeeded only after a query gave up, the moment it gave up; -1 for a failed lookup. The
clock points are user space on purpose: the lookup time an application waits (``timestamps: user``).
req_bytes/resp_bytes: every query/answer byte of the lookup; dups: answers that came twice; arrival:
completion order. Per-lookup DNS details ride in ``meta['per_row']`` (``PER_ROW``).
"""

from __future__ import annotations

import heapq
import os
import selectors
import socket
import time
from array import array
from dataclasses import dataclass

from netslo.core.errors import SpecError
from netslo.stats import samples, stream
from netslo.traffic import dnswire
from netslo.traffic.clock import now_ns, pin_cpu, set_timer_slack
from netslo.traffic.probes import ProbeSpec

QTYPE_MODES = ("parallel", "sequential", "a", "aaaa")
DEFAULT_TIMEOUT_S = 1.0       # per query send; glibc's 5 s would stretch a gate run by minutes per lost answer
DEFAULT_ATTEMPTS = 2          # sends per query, glibc's default
RESOLV_CONF = "resolv.conf"   # --target value: the nameserver (and search/ndots) of the pod's /etc/resolv.conf
DNS_PORT = 53
DRAIN_SLACK_NS = 5_000_000_000   # after the schedule: how much longer than twice the longest lookup to wait at most
# per-row arrays in meta['per_row'] (one int per lookup, in seq order):
PER_ROW = {
    "dns_rcode": "final rcode of the lookup (0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN...), -1 no answer (timeout)",
    "dns_timeouts_a": "A query sends that expired without an answer",
    "dns_timeouts_aaaa": "AAAA query sends that expired without an answer",
    "dns_queries": "query datagrams sent (every candidate name and retry)",
    "dns_names": "names tried (search expansion), 1 = the first answered",
}


@dataclass(frozen=True)
class DnsOptions:
    """What one lookup asks. Times in seconds."""

    name: str = "kubernetes.default.svc.cluster.local"
    qtypes: str = "parallel"          # one of QTYPE_MODES
    search: tuple = ()                # search suffixes, resolv.conf order
    ndots: int = 1                    # glibc default; Kubernetes pods get 5
    timeout: float = DEFAULT_TIMEOUT_S
    attempts: int = DEFAULT_ATTEMPTS

    def check(self, prefix: str = "--") -> "DnsOptions":
        """SpecError naming the first bad option."""
        if self.qtypes not in QTYPE_MODES:
            raise SpecError(f"{prefix}qtypes", self.qtypes, f"one of {', '.join(QTYPE_MODES)}")
        for n in (self.name, *self.search):
            try:
                dnswire.encode_name(n)
            except dnswire.DnsWireError:
                raise SpecError(f"{prefix}name" if n == self.name else f"{prefix}search", n,
                                "a DNS name of labels of 1..63 bytes, at most 255 bytes") from None
        if not dnswire.normalize(self.name):
            raise SpecError(f"{prefix}name", self.name, "a non-empty DNS name")
        if not 0 <= self.ndots <= 15:
            raise SpecError(f"{prefix}ndots", self.ndots, "a whole number 0..15 (resolv.conf caps it at 15)")
        if not self.timeout > 0:
            raise SpecError(f"{prefix}timeout", self.timeout, "a duration > 0, e.g. '1s'")
        if not 1 <= self.attempts <= 5:
            raise SpecError(f"{prefix}attempts", self.attempts, "a whole number 1..5 (resolv.conf caps it at 5)")
        return self

    @property
    def families(self) -> tuple:
        return {"parallel": (dnswire.QTYPE_A, dnswire.QTYPE_AAAA), "sequential": (dnswire.QTYPE_A, dnswire.QTYPE_AAAA),
                "a": (dnswire.QTYPE_A,), "aaaa": (dnswire.QTYPE_AAAA,)}[self.qtypes]

    def longest_s(self) -> float:
        """The longest a lookup can take (every send of every query of every name expiring), s."""
        per_name = self.timeout * self.attempts * (2 if self.qtypes == "sequential" else 1)
        return per_name * len(dnswire.candidates(self.name, self.search, self.ndots))

    def cli_args(self) -> list[str]:
        """The agent's ``probe dns`` options for these settings."""
        args = ["--name", self.name, "--qtypes", self.qtypes, "--ndots", str(self.ndots),
                "--timeout", f"{self.timeout:.6f}s", "--attempts", str(self.attempts)]
        return args + (["--search", ",".join(self.search)] if self.search else [])


def read_resolv_conf(text: str) -> dict:
    """resolv.conf(5) text -> {'nameservers': [...], 'search': [...], 'ndots'/'timeout'/'attempts': int}
    (only what is set)."""
    out: dict = {"nameservers": [], "search": []}
    for line in text.splitlines():
        words = line.split("#", 1)[0].split(";", 1)[0].split()
        if not words:
            continue
        if words[0] == "nameserver" and len(words) > 1:
            out["nameservers"].append(words[1])
        elif words[0] in ("search", "domain"):
            out["search"] = words[1:]
        elif words[0] == "options":
            for opt in words[1:]:
                key, _, value = opt.partition(":")
                if key in ("ndots", "timeout", "attempts") and value.isdigit():
                    out[key] = int(value)
    return out


class _Query:
    __slots__ = ("qtype", "qid", "payload", "sends", "answer", "gave_up")

    def __init__(self, qtype: int, qid: int, payload: bytes):
        self.qtype, self.qid, self.payload = qtype, qid, payload
        self.sends, self.answer, self.gave_up = 0, None, False

    @property
    def done(self) -> bool:
        return self.answer is not None or self.gave_up


class _Lookup:
    __slots__ = ("seq", "sock", "row", "names", "name_i", "queries", "timeouts", "sent", "finished")

    def __init__(self, seq: int, sock, row, names: list):
        self.seq, self.sock, self.row, self.names = seq, sock, row, names
        self.name_i, self.queries, self.timeouts, self.sent, self.finished = 0, {}, [0, 0], 0, False


class _Run:
    """The probe's state: open lookups, the heap of query deadlines, the per-row arrays."""

    def __init__(self, spec: ProbeSpec, opts: DnsOptions, rows, target: tuple):
        self.spec, self.opts, self.rows, self.target = spec, opts, rows, target
        self.sel = selectors.DefaultSelector()
        self.deadlines: list = []           # (deadline_ns, seq, qid, send number)
        self.open: dict[int, _Lookup] = {}
        self.timeout_ns = round(opts.timeout * 1e9)
        self.next_id = int.from_bytes(os.urandom(2), "big")
        self.arrivals = 0
        self.errors = {"send": 0, "refused": 0, "malformed": 0}
        self.names = dnswire.candidates(opts.name, opts.search, opts.ndots)
        n = spec.count
        self.per_row = {k: array("q", [0]) * n for k in PER_ROW}

    # -- sending
    def start(self, seq: int, sched: int) -> None:
        family = socket.AF_INET6 if ":" in self.target[0] else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        sock.setblocking(False)
        sock.connect(self.target)
        lk = _Lookup(seq, sock, self.rows[seq], self.names)
        self.open[seq] = lk
        self.sel.register(sock, selectors.EVENT_READ, lk)
        lk.row["sched_ns"] = sched
        lk.row["req_bytes"] = lk.row["resp_bytes"] = 0
        self._ask(lk, first=True)

    def _ask(self, lk: _Lookup, first: bool = False) -> None:
        """Send the queries of ``lk``'s current name that go out together (both, or A first)."""
        lk.queries = {}
        name = lk.names[lk.name_i]
        for qtype in self.opts.families:
            qid = self._new_id()
            lk.queries[qid] = _Query(qtype, qid, dnswire.query(qid, name, qtype))
        out = list(lk.queries.values())
        if self.opts.qtypes == "sequential":
            out = out[:1]
        for i, q in enumerate(out):
            self._send(lk, q, stamp=first and i == 0)

    def _new_id(self) -> int:
        self.next_id = (self.next_id + 1) & 0xFFFF
        return self.next_id

    def _send(self, lk: _Lookup, q: _Query, stamp: bool = False) -> None:
        t = now_ns()
        if stamp:
            lk.row["send_ns"] = lk.row["send_app_ns"] = t
        try:
            lk.sock.send(q.payload)
        except OSError:
            self.errors["send"] += 1     # it expires like a lost one
        q.sends += 1
        lk.sent += 1
        lk.row["req_bytes"] += len(q.payload)
        heapq.heappush(self.deadlines, (t + self.timeout_ns, lk.seq, q.qid, q.sends))

    # -- receiving and expiring
    def wait(self, until_ns: int, drain: bool = False) -> None:
        """Handle answers and expired sends until ``until_ns``; with ``drain`` also stop as soon as
        every lookup has ended."""
        while True:
            self.expire(now_ns())
            t = now_ns()
            if t >= until_ns or (drain and not self.open):
                return
            nxt = min(until_ns, self.deadlines[0][0]) if self.deadlines else until_ns
            ready = self.sel.select(max(0.0, (nxt - t) / 1e9)) if self.open else _sleep_until(nxt)
            for key, _ in ready:
                self._drain(key.data)

    def _drain(self, lk: _Lookup) -> None:
        while not lk.finished:
            try:
                data = lk.sock.recv(65535)
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionRefusedError:   # ICMP port unreachable: no server; the send expires
                self.errors["refused"] += 1
                continue
            except OSError:
                return
            t = now_ns()
            try:
                msg = dnswire.parse(data)
            except dnswire.DnsWireError:
                self.errors["malformed"] += 1
                continue
            q = lk.queries.get(msg.id)
            if not msg.is_response or q is None or msg.qtype != q.qtype \
                    or msg.qname != dnswire.normalize(lk.names[lk.name_i]):
                continue
            lk.row["resp_bytes"] += len(data)
            if q.answer is not None:
                lk.row["dups"] += 1
                continue
            q.answer = (msg, t)
            self._progress(lk, t)

    def expire(self, t: int) -> None:
        while self.deadlines and self.deadlines[0][0] <= t:
            _, seq, qid, sends = heapq.heappop(self.deadlines)
            lk = self.open.get(seq)
            q = lk.queries.get(qid) if lk is not None else None
            if q is None or q.done or q.sends != sends:
                continue
            lk.timeouts[q.qtype == dnswire.QTYPE_AAAA] += 1
            if q.sends < self.opts.attempts:
                self._send(lk, q)
            else:
                q.gave_up = True
                self._progress(lk, now_ns())

    def _progress(self, lk: _Lookup, t: int) -> None:
        """After an answer or a give-up at ``t``: send what comes next, or end the lookup."""
        qs = list(lk.queries.values())
        if self.opts.qtypes == "sequential" and qs[0].done and qs[1].sends == 0:
            self._send(lk, qs[1])
            return
        if not all(q.done for q in qs):
            return
        answered = [q.answer[0] for q in qs if q.answer is not None]
        if any(m.rcode == dnswire.NOERROR and m.addresses(m.qtype) for m in answered):
            last = max((q.answer[1] for q in qs if q.answer is not None), default=t)
            self._finish(lk, dnswire.NOERROR, max(last, t) if any(q.gave_up for q in qs) else last)
        elif any(q.gave_up for q in qs):
            self._finish(lk, -1, None)
        elif lk.name_i + 1 < len(lk.names):
            lk.name_i += 1
            self._ask(lk)
        else:
            rcodes = [m.rcode for m in answered]
            self._finish(lk, next((r for r in rcodes if r != dnswire.NOERROR), dnswire.NOERROR), None)

    def _finish(self, lk: _Lookup, rcode: int, done_ns: int | None) -> None:
        lk.finished = True
        if done_ns is not None:
            lk.row["recv_ns"] = lk.row["recv_app_ns"] = done_ns
            lk.row["arrival"] = self.arrivals
            self.arrivals += 1
        i = lk.seq
        self.per_row["dns_rcode"][i] = rcode
        self.per_row["dns_timeouts_a"][i] = lk.timeouts[0]
        self.per_row["dns_timeouts_aaaa"][i] = lk.timeouts[1]
        self.per_row["dns_queries"][i] = lk.sent
        self.per_row["dns_names"][i] = lk.name_i + 1
        self.sel.unregister(lk.sock)
        lk.sock.close()
        del self.open[lk.seq]

    def close(self) -> None:
        """Lookups still open (the run was cut short) end as failed with no answer."""
        for lk in list(self.open.values()):
            self._finish(lk, -1, None)
        self.sel.close()


def _sleep_until(t_ns: int) -> list:
    """Sleep until ``t_ns`` (nothing open to wait on); no ready sockets."""
    while (left := t_ns - now_ns()) > 0:
        time.sleep(left / 1e9)
    return []


def _allow_open_sockets(n: int) -> None:
    """Raise the soft open-file limit towards ``n`` more sockets (one per lookup still open: up to
    the longest lookup over the interval), as far as the hard limit allows."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 64
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))


def resolve_target(spec: ProbeSpec, opts: DnsOptions, resolv_path: str = "/etc/resolv.conf") -> tuple:
    """(server address, port) and the options; with ``--target resolv.conf``: the first nameserver of
    the pod's resolv.conf (port 53) and its search list and ndots where the options leave them unset."""
    if spec.host != RESOLV_CONF:
        return (spec.host.strip("[]"), spec.port), opts     # an IPv6 server may come as [addr]
    from dataclasses import replace
    try:
        with open(resolv_path) as f:
            conf = read_resolv_conf(f.read())
    except OSError as e:
        raise SpecError("--target", spec.host, f"a readable {resolv_path} ({e.strerror})") from None
    if not conf["nameservers"]:
        raise SpecError("--target", spec.host, f"a {resolv_path} with a nameserver line")
    if not opts.search and conf["search"]:
        opts = replace(opts, search=tuple(conf["search"]), ndots=conf.get("ndots", opts.ndots))
    return (conf["nameservers"][0], DNS_PORT), opts


def run(spec: ProbeSpec, sink=None) -> samples.SampleSet:
    """Run ``spec.count`` lookups of ``spec.dns`` (a ``DnsOptions``) at ``spec.interval``; returns
    one row per lookup (see the module doc), the per-lookup DNS details in ``meta['per_row']``."""
    opts = (spec.dns or DnsOptions()).check()
    target, opts = resolve_target(spec, opts)
    pin_cpu(spec.cpu)
    set_timer_slack(1)
    n = spec.count
    longest = round(opts.longest_s() * 1e9)
    _allow_open_sockets(int(opts.longest_s() / spec.interval) + 2)
    rows = stream.RowStream(n, settle_ns=longest + int(spec.wait * 1e9), sink=sink, keep_all=True,
                            defaults={"tos_sent": 0})
    r = _Run(spec, opts, rows, target)
    try:
        start = now_ns() + 20_000_000
        for seq in range(n):
            sched = start + seq * spec.interval_ns
            r.wait(sched)
            r.start(seq, sched)
        # every open lookup ends at its last deadline at the latest; the bound only guards a stalled host
        r.wait(now_ns() + 2 * longest + DRAIN_SLACK_NS, drain=True)
    finally:
        r.close()
    meta = spec.meta()
    server = f"[{target[0]}]:{target[1]}" if ":" in target[0] else f"{target[0]}:{target[1]}"
    meta.update(timestamps="user", server=server, dns=vars(opts) | {"search": list(opts.search)},
                names=r.names, per_row={k: list(v) for k, v in r.per_row.items()}, dns_errors=r.errors)
    return rows.finish(meta)
