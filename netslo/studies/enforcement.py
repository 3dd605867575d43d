"""Time until a continuous probe's packets stop or resume after a change (a policy, a Service).

One tcp-crr probe (``netslo.traffic.probes.tcp``) opens a new connection every ``interval`` (1 ms by default)
for the whole study; meanwhile the study applies its changes one after another, each at a recorded
time ``t0`` and each owning a window ``[t0, t0 + window)``:

  stop     (a deny policy)    latency = send time of the first request after the window's last
                              answered one (every later request of the window is dropped) - t0;
                              +inf when the window's last request was answered (not enforced in time)
  resume   (an allow policy,  latency = send time of the window's first answered request - t0;
            a new Service)    +inf when none was answered; not measured (NaN: left out of the
                              statistics, counted in the summary) when the last request before
                              t0 was answered, i.e. the path was open already

Clock points: ``t0`` is CLOCK_MONOTONIC (``time.monotonic_ns``) in this process just before the change
is requested (the iptables call, the API create/delete); the send times are the probe's user-space
CLOCK_MONOTONIC just before each connect (``send_app_ns``). Both read one clock when the probe runs on
this kernel: the embedded provider and kind (nodes are containers on this host's kernel). Error
bound: the change took effect between the last request that still saw the old state and the first
that saw the new one, so the value is an upper bound with **resolution = the probe interval**; it
also counts the one-way delay from the client to the enforcement point (microseconds on one host).
A change not in effect within its window is *censored* (+inf): percentiles still order it (above
every real value), and the window is longer than the thresholds it is judged against.

Why a new connection per request: a stateful datapath judges a flow on its first packet and lets the
rest through on its connection-tracking entry (Calico's iptables/nftables rules accept ESTABLISHED
before any policy; Cilium's BPF conntrack likewise; kube-proxy's DNAT lives in the entry too), and
Kubernetes leaves what a new policy does to existing connections to the implementation. One long
flow would measure the conntrack timeout, not the change (kind + Calico, 2026-11-26, with one UDP
flow: a deny was not in effect within 2.4 s in 10 of 10 trials). Each request here is a new flow,
judged afresh: "answered" means its SYN was admitted (and routed), the question a change is about. Its
tuple is new too: the probe takes source ports in turn (``probes.tcp.SourcePorts``), so a tuple comes
back only after the client's whole ephemeral range (28 232 ports by default). Two conntrack entries a
returning tuple could meet decide how long that must be:
- a closed flow's (10 s, ``nf_conntrack_tcp_timeout_close``): a SYN on its tuple can pass a deny as an
  established flow (kind + Calico, 2026-11-28, ports left to ``connect()``: ~1 in 10 000 connections
  after the deny, which made the P99 of ``policy_enforce`` the window's length). At 1 ms a tuple is
  back after ~28 s.
- an unanswered SYN's (120 s, ``nf_conntrack_tcp_timeout_syn_sent``, refreshed whenever its tuple
  comes back): a request to a ClusterIP sent before kube-proxy programs it is routed out as it is
  and leaves such an entry on the client's node without the Service's DNAT, and a later SYN on that
  tuple follows the entry, not the new rules. On kind + Calico (2026-11-28, 1 ms, a create every
  4.42 s), ports in turn: the first seven creates took 0.1-1.2 s, and once the range had come round
  (28 s) 262 of 368 were not answered within 1.92 s; ports left to ``connect()``: the same from the
  seventh create on, with ~27 700 such entries on the client's node, nearly the whole range. The
  Service study on a real cluster therefore sends every 5 ms (a tuple back after 141 s) and checks
  that the range allows it (``tuple_return_s``; ``ServiceProgram.tuple_return_s``).
A connection unanswered after ``GIVE_UP_S`` is aborted before its SYN could be sent again (RTO 1 s),
so a SYN dropped in one window never gets through in the next; connections end with RST.

Statistics over N trials: nearest-rank percentiles with order-statistic CIs (``netslo.stats.analysis``); a
percentile N cannot bound is rejected when the SLO file is loaded (``slo.defaults.trials``).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from netslo.core.errors import InfrastructureError
from netslo.slo import spec as slo_mod
from netslo.stats.analysis import Estimate, percentile_estimate
from netslo.stats.samples import SampleSet
from netslo.traffic.probes import IN_TURN, ProbeSpec

STOP, RESUME = "stop", "resume"
START_S = 0.3            # s from a warm agent's start to its first request, with margin (~0.05 s measured)
TAIL_S = 0.05            # s the schedule runs past the last window
REQ_BYTES = 64
PROTOCOL = "tcp-crr"     # a new flow per request (see the module docstring)
GIVE_UP_S = 0.25         # s a request's connection may take: above any handshake here, below the SYN RTO
PORT_MODE = IN_TURN      # the connections' source ports, taken in turn (see the module docstring)
WAIT_S = 0.3             # s the probe waits for answers after its last request (> GIVE_UP_S)
REPLACE_STUDIES = 2      # run: further studies at most that replace trials not measured


@dataclass(frozen=True)
class Step:
    """One change of a trial: ``series`` (an SLO series, e.g. 'policy_enforce') measures ``kind``
    (STOP or RESUME) after ``apply()``; ``reset()`` (optional) runs after the window and undoes it:
    it is not measured, but it must have stopped the requests within its own window (else the next
    trial would measure a path that never closed, and the study errors)."""

    series: str
    kind: str
    apply: object
    reset: object = None


RESET = ""   # the series of a reset: checked, not reported


@dataclass(frozen=True)
class Change:
    """A change as it happened: its series and kind, t0 and the end of its window (ns, CLOCK_MONOTONIC)."""

    series: str
    kind: str
    t0_ns: int
    end_ns: int


def latency(send_ns: np.ndarray, answered: np.ndarray, kind: str, t0_ns: int, end_ns: int) -> float:
    """Seconds from ``t0_ns`` until the requests sent in [t0, end) stopped (STOP) or resumed (RESUME)
    being answered; +inf when they did not within the window; NaN for a RESUME whose path was open
    already (the last request before t0 was answered: nothing to measure). ``send_ns`` ascending."""
    lo, hi = np.searchsorted(send_ns, [t0_ns, end_ns])
    if hi <= lo:
        raise InfrastructureError(f"the probe sent nothing in a {kind} window of {(end_ns - t0_ns) / 1e6:.0f} ms "
                                  f"(its schedule did not cover the change)")
    sent, got = send_ns[lo:hi], answered[lo:hi]
    if kind == RESUME:
        if lo > 0 and answered[lo - 1]:
            return math.nan
        first = np.flatnonzero(got)
        return (sent[first[0]] - t0_ns) * 1e-9 if len(first) else math.inf
    if got[-1]:
        return math.inf
    last = np.flatnonzero(got)
    return (sent[last[-1] + 1 if len(last) else 0] - t0_ns) * 1e-9


def latencies(samples: SampleSet, changes: list[Change]) -> dict[str, np.ndarray]:
    """series -> latency (s) of each of its changes, in order (``latency``)."""
    r = samples.rows
    sent = r["send_app_ns"] >= 0
    order = np.argsort(r["send_app_ns"][sent], kind="stable")
    send_ns, answered = r["send_app_ns"][sent][order], (r["recv_ns"][sent] >= 0)[order]
    if len(send_ns) == 0 or (changes and (send_ns[0] > changes[0].t0_ns or send_ns[-1] < changes[-1].end_ns)):
        raise InfrastructureError("the probe's schedule did not cover every change (it started late or ended "
                                  "early): raise the lead-in")
    out: dict[str, list] = {}
    for c in changes:
        value = latency(send_ns, answered, c.kind, c.t0_ns, c.end_ns)
        if c.series == RESET:
            if math.isinf(value):
                raise InfrastructureError(f"a reset did not stop the requests within its "
                                          f"{(c.end_ns - c.t0_ns) / 1e6:.0f} ms window: the next trial would "
                                          f"find the path open already")
            continue
        out.setdefault(c.series, []).append(value)
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def estimates(values: np.ndarray, series: str, confidence: float, unit: str = "s") -> dict[str, Estimate]:
    """'<series>.<stat>' -> Estimate for ``slo.TRIAL_STATS`` (min/max are the sample's, exact), over
    the measured trials (NaN: not measured, left out; none measured: NaN estimates, which fail);
    ``unit`` that of the series (``slo.unit_of``)."""
    x = np.asarray(values, dtype=np.float64)
    x = np.sort(x[~np.isnan(x)])
    out = {}
    for stat in slo_mod.TRIAL_STATS:
        if stat in ("min", "max"):
            v = float(x[0 if stat == "min" else -1]) if len(x) else math.nan
            out[f"{series}.{stat}"] = Estimate(v, v, v, len(x), unit)
        else:
            out[f"{series}.{stat}"] = percentile_estimate(x, float(stat[1:]), confidence, unit)
    return out


def decide(est: Estimate, threshold, confidence: float) -> slo_mod.Check:
    """The verdict of a trial statistic: by its CI; a CI whose upper end is a censored trial (+inf) but
    that has enough trials is decided on the point estimate (the censored value exceeds every threshold)."""
    v = slo_mod.judge(est, threshold)
    if v == slo_mod.INCONCLUSIVE and est.n >= slo_mod.samples_needed(threshold.metric, confidence):
        return slo_mod.Check(threshold, est, slo_mod.PASS if est.value <= threshold.limit else slo_mod.FAIL,
                             by_point=True)
    return slo_mod.decide(est, threshold, confidence)


@dataclass
class Trials:
    """What a study measured: latency per series and trial (s, +inf = not within the window)."""

    values: dict
    interval: float
    window: float
    samples: SampleSet
    checks: list = field(default_factory=list)
    replaced: int = 0      # trials run again because a trial was not measured (the path was open)

    def estimates(self, confidence: float) -> dict[str, Estimate]:
        out = {}
        for series, v in self.values.items():
            out.update(estimates(v, series, confidence))
        return out

    def judge(self, thresholds: list, confidence: float) -> list:
        """Checks of the thresholds on this study's series (others are not its business)."""
        est = self.estimates(confidence)
        self.checks = [decide(est[t.metric], t, confidence) for t in thresholds if t.metric in est]
        return self.checks

    def numbers(self, confidence: float) -> dict:
        """What studies.json keeps: each trial's value (s; "inf" censored, "nan" not measured) and each
        statistic as [value, lo, hi, n]."""
        def num(x) -> object:
            return float(x) if math.isfinite(x) else str(x)
        return {"interval_s": self.interval, "window_s": self.window,
                "trials": {k: [num(x) for x in v] for k, v in self.values.items()},
                "estimates": {k: [num(e.value), num(e.lo), num(e.hi), e.n] for k, e in self.estimates(confidence).items()}}

    def censored(self, series: str) -> int:
        return int(np.isinf(self.values[series]).sum())

    def summary(self) -> list[str]:
        """A line per series (trials, censored, P50, max) and a line per check."""
        lines = []
        for series, v in self.values.items():
            done = v[np.isfinite(v)]
            unmeasured = int(np.isnan(v).sum())
            lines.append(f"{series}: {len(v)} trials, {self.censored(series)} not within {self.window * 1e3:.0f} ms"
                         + (f", {unmeasured} not measured (the path was open before the change)" if unmeasured else "")
                         + (f", {self.replaced} run again for them" if unmeasured and self.replaced else "")
                         + (f", P50 {np.median(done) * 1e3:.2f} ms, max {done.max() * 1e3:.2f} ms" if len(done) else "")
                         + f" (resolution {self.interval * 1e3:g} ms)")
        return lines + [c.line() for c in self.checks]

    @property
    def failed(self) -> list:
        return [c for c in self.checks if c.verdict != slo_mod.PASS]


def probe_spec(host: str, port: int, count: int, interval: float) -> ProbeSpec:
    """The studies' probe (also ``policy_cost``'s): ``count`` new connections, ``interval`` s apart,
    64-byte requests, each given up after GIVE_UP_S, source ports in turn (see the module docstring)."""
    return ProbeSpec(PROTOCOL, host, port, count=count, interval=interval, req_bytes=REQ_BYTES,
                     resp_bytes=REQ_BYTES, wait=WAIT_S, give_up=GIVE_UP_S, source_ports=PORT_MODE)


def run(cluster, client, host: str, port: int, steps: list[Step], trials: int, window: float,
        interval: float = 0.001, lead_in: float | None = None, reset_window: float | None = None,
        tuple_return_s: float = 0.0) -> Trials:
    """``trials`` rounds of ``steps`` while a tcp-crr probe from ``client`` to host:port (a TCP responder)
    runs throughout.

    Each step's window is ``window`` s from its t0 (the change's own duration included); a step's
    ``reset`` runs after its window, in a window of ``reset_window`` s (default ``window``), except
    after the study's last step (the probe's end-of-run exchange needs the open path). The
    changes start ``lead_in`` s after the probe (default: START_S); the agent is
    started once before, so the lead-in does not include its cold start. A probe that still started
    after the first change (a loaded host) is seen in its samples: the study is run once more (after
    undoing the last step) with a lead-in longer than the delay measured.

    A trial not measured (a RESUME whose path was open before its change: on kind + Cilium, 2026-11-27,
    the first Service create found its address answering, we infer from the Service made to reserve it)
    is replaced: a further study runs as many rounds as the series with most unmeasured trials lacks,
    after undoing the last step inside its probe's schedule (checked like every reset),
    ``REPLACE_STUDIES`` times at most, and only while at most half the trials are missing (more is no
    one-off). What is still missing then is judged as missing (too few trials: not a verdict).
    ``tuple_return_s``: the least time (s) before a source tuple may come back (the client's port
    range x ``interval``); a shorter one, as the probe reports its range, is an InfrastructureError
    (the study's values would not be trusted)."""
    reset_window = window if reset_window is None else reset_window
    lead_in = START_S if lead_in is None else lead_in
    if trials < 1 or window <= 0 or interval <= 0 or reset_window <= 0:
        raise ValueError(f"trials/window/reset_window/interval: values {trials!r}/{window!r}/{reset_window!r}/"
                         f"{interval!r} — expected > 0")
    cluster.exec_agent(client, ["probe", "--help"], timeout=60.0)   # the probes imported before the lead-in
    samples, changes, late_ns = _study(cluster, client, host, port, steps, trials, window, interval, lead_in,
                                       reset_window)
    if late_ns > 0:   # started after the first change: once more, waiting longer than it took
        if steps[-1].reset:
            steps[-1].reset()
        samples, changes, _ = _study(cluster, client, host, port, steps, trials, window, interval,
                                     lead_in + 1.5 * late_ns * 1e-9 + START_S, reset_window)
    check_tuple_return(samples, interval, tuple_return_s)
    values, parts, replaced = latencies(samples, changes), [samples], 0
    for _ in range(REPLACE_STUDIES):
        short = max(trials - int((~np.isnan(v)).sum()) for v in values.values())
        if short <= 0 or short > trials // 2:   # more than half: a systematic cause (an allow after a deny
            break                               # that never took effect), which the verdict reports
        more, more_changes, _ = _study(cluster, client, host, port, steps, short, window, interval, lead_in,
                                       reset_window, undo_first=steps[-1].reset)
        for series, v in latencies(more, more_changes).items():
            values[series] = np.concatenate([values[series], v])
        parts.append(more)
        replaced += short
    return Trials(values, interval, window, parts[0] if len(parts) == 1 else SampleSet.concat(parts),
                  replaced=replaced)


def check_tuple_return(samples: SampleSet, interval: float, least_s: float) -> None:
    """InfrastructureError when the probe's source ports (taken in turn over ``source_port_range``,
    one per ``interval`` s) bring a tuple back sooner than ``least_s`` s."""
    if least_s <= 0:
        return
    if not samples.meta.get("source_port_range"):
        raise InfrastructureError("the study's probe reported no source-port range: it must take source "
                                  "ports in turn (an agent older than the study?)")
    lo, hi = samples.meta["source_port_range"]
    back_s = (hi - lo + 1) * interval
    if back_s < least_s:
        raise InfrastructureError(
            f"the study's probe takes source ports in turn over {lo}-{hi}, so a tuple comes back after "
            f"{back_s:.0f} s at one connection per {interval * 1e3:g} ms; it must not within {least_s:.0f} s "
            f"(a conntrack entry of an unanswered SYN lives that long): widen the client's "
            f"net.ipv4.ip_local_port_range")


def _study(cluster, client, host, port, steps, trials, window, interval, lead_in, reset_window, undo_first=None):
    """One probe run with the trials inside it: (samples, changes, ns the first request came after the
    first change's t0; <= 0 when the probe was in time). ``undo_first``: a reset run (and checked) in
    the schedule before the first trial, for a study that follows one whose last step was kept."""
    # (the last trial's reset is not run: one reset window of margin)
    resets = sum(reset_window for s in steps if s.reset) + (reset_window if undo_first else 0)
    trial_time = trials * (len(steps) * window + resets)
    span = lead_in + 1.1 * trial_time + TAIL_S             # 10 %: changes that overrun their windows
    spec = probe_spec(host, port, math.ceil(span / interval), interval)
    box: dict = {}

    def probe():
        try:
            box["samples"] = cluster.probe(client, spec)
        except BaseException as e:   # handed to the caller below
            box["error"] = e

    thread = threading.Thread(target=probe, name="enforcement-probe", daemon=True)
    thread.start()
    changes: list[Change] = []
    try:
        time.sleep(lead_in)
        if undo_first:
            changes.append(_change(RESET, STOP, undo_first, reset_window))
        for trial in range(trials):
            for i, s in enumerate(steps):
                changes.append(_change(s.series, s.kind, s.apply, window))
                if s.reset and not (trial == trials - 1 and i == len(steps) - 1):
                    changes.append(_change(RESET, STOP, s.reset, reset_window))
    except (KeyboardInterrupt, SystemExit):
        raise   # not waiting out the probe's schedule (minutes): the cluster's teardown ends its command
    except BaseException:
        thread.join()
        raise
    thread.join()
    if "error" in box:
        raise box["error"]
    sent = box["samples"].rows["send_app_ns"]
    sent = sent[sent >= 0]
    late = int(sent.min()) - changes[0].t0_ns if len(sent) and changes else 0
    return box["samples"], changes, late


def _change(series: str, kind: str, action, window: float) -> Change:
    """Run ``action`` at a recorded t0 and wait out its window."""
    t0 = time.monotonic_ns()
    action()
    end = t0 + int(window * 1e9)
    _sleep_until(end)
    return Change(series, kind, t0, end)


def _sleep_until(t_ns: int) -> None:
    left = (t_ns - time.monotonic_ns()) * 1e-9
    if left > 0:
        time.sleep(left)


def trials_for(thresholds: list) -> int:
    """The trials a study runs for ``thresholds``: the most any of them is judged on (``Threshold.trials``:
    its objective's ``trials``, else ``defaults.trials``)."""
    n = max((t.trials for t in thresholds), default=0)
    if n < 1:
        raise ValueError("thresholds: none of a change study (no trials)")
    return n


def window_for(thresholds: list, series: tuple, floor: float = 0.05, factor: float = 1.2) -> float:
    """A window (s) longer than every threshold of ``series``: ``factor`` x the largest, at least ``floor``;
    so a change censored at the window's end exceeds every threshold it is judged against."""
    limits = [t.limit for t in thresholds if t.metric.partition(".")[0] in series]
    return max(floor, factor * max(limits, default=0.0))
