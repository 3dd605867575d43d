"""What an action does to traffic, measured: trials of one action while probes run through it.

For the whole study four kinds of traffic run from one client pod to one server pod
(``netslo.stats.disruption`` defines every metric, with its resolution):

* open-loop UDP, ``UDP_INTERVAL_S`` apart (1 kHz): outage per direction, loss, recovery, RTT;
* ``HELD`` established TCP connections (tcp-rr, one request every ``HELD_INTERVAL_S`` each): resets and
  the longest stall;
* new connections (tcp-crr, one every ``NEW_INTERVAL_S``, each given up after
  ``enforcement.GIVE_UP_S``): connection failures;
* with a DNS server given, DNS lookups (the ``dns`` probe, one every ``DNS_INTERVAL_S``): lookups that
  timed out.

The probes start together; after ``lead_in`` s, each trial waits ``BEFORE_S`` (the RTT before), takes
t0 (CLOCK_MONOTONIC here, the probes' clock on this kernel), runs the action and waits until its
window (``Action.window``) is over; the next trial follows. Per trial the metrics of its window;
over trials nearest-rank percentiles with order-statistic CIs, judged by ``disruption.*`` thresholds
(``netslo.slo.spec``: durations, ``disruption.loss`` a fraction, ``disruption.resets`` and
``disruption.conn_fail`` counts). A probe that was not running through every window (started late,
ended early, failed) is an InfrastructureError, never a measured outage.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np

from netslo.core import progress
from netslo.core.errors import InfrastructureError
from netslo.slo import spec as slo_mod
from netslo.stats import disruption as metrics
from netslo.studies import enforcement
from netslo.traffic.probes import ProbeSpec
from netslo.traffic.probes.reachable import await_answers

PREFIX = "disruption."
UDP_INTERVAL_S = 0.001
HELD = 3
HELD_INTERVAL_S = 0.020
NEW_INTERVAL_S = 0.010
DNS_INTERVAL_S = 0.020
REQ_BYTES = 64
BEFORE_S = 0.5          # s of steady traffic before each action (rtt_before)
LEAD_IN_S = 0.5         # s from the probes' start to the first trial's BEFORE_S, at least ...
LEAD_IN_EXECS = 12      # ... and as long as this many agent execs (the warm-up's) one after another,
LEAD_IN_TRIES = 1.5     # ... and this many times await_target's two probes: on kind v1.37 + Calico here
# (2026-12-07) the held probes connected 1.4 s after they were asked, after a drain had begun (the
# old 1.2 s lead-in), and failed; with a 3 s lead-in the study ran
TAIL_S = 0.3
WAIT_S = 1.0            # s the probes wait for answers after their last request
# s: the longest a trial's window may go without a UDP request sent (``netslo.stats.disruption``
# ``send_gap``) and be judged as measured; beyond it the client was held back (not running) and the
# trial is judged on its measured values and on their worst case over the gap (``Study.judge``), never
# read as a shorter outage. A starved sender is not a frozen one: on kind + Cilium here (2 cores,
# 2026-12-03) a cilium-agent starting beside the client held it back 31-139 ms, a DaemonSet roll
# 249-381 ms, after the gate on the kept cluster (2026-12-07) 1.1-1.3 s; a paused node holds it for as
# long as the pause
MAX_SEND_GAP_S = 1.0
NOT_RUNNING = "its probes were not running (the node paused or the process starved)"
# s the study's target (the server, or a drain's Service) may take to answer before the probes start:
# ready endpoints are not a programmed Service (kube-proxy writes it in a later sync)
TARGET_AWAIT_S = 30.0


@dataclass
class Trial:
    """One action as it happened: t0 (ns), its marks (ns by name) and its metrics."""

    t0_ns: int
    marks: dict
    values: dict = field(default_factory=dict)
    bounds: dict | None = None      # the metrics at their worst over the client's gaps (held back), else None


@dataclass
class Study:
    """Trials of one action and what the probes measured; ``checks`` once judged."""

    action: str
    description: str
    emulated: bool
    trials: list
    window: float
    samples: dict                   # probe name -> SampleSet (udp, held-<i>, new)
    checks: list = field(default_factory=list)
    held_back: str = ""             # how the client was held back in both runs (``run``), else ""

    def series(self, name: str, worst: bool = False) -> np.ndarray:
        """Per trial the metric ``name``; ``worst``: a held-back trial's worst case (``Trial.bounds``)."""
        return np.asarray([((t.bounds if worst and t.bounds else t.values)).get(name, math.nan) for t in self.trials],
                          dtype=np.float64)

    def estimates(self, confidence: float, worst: bool = False) -> dict:
        return {k: e for name in metrics.SERIES
                for k, e in enforcement.estimates(self.series(name, worst), PREFIX + name, confidence, _unit(name)).items()}

    def judge(self, thresholds: list, confidence: float) -> list:
        """Checks of the ``disruption.*`` thresholds (others are not this study's business). A study
        whose client was held back (``held_back``) is judged twice, as measured (the best case: what
        the gaps hid can only add) and at its worst: a check passes when it passes at the worst and
        fails when it fails as measured; when the two disagree the gap could hide a breach and the
        study is an InfrastructureError naming the gap and the checks."""
        est = self.estimates(confidence)
        checks = [enforcement.decide(est[t.metric], t, confidence) for t in thresholds if t.metric in est]
        if self.held_back:
            worst = self.estimates(confidence, worst=True)
            judged = [(c, enforcement.decide(worst[c.threshold.metric], c.threshold, confidence)) for c in checks]
            open_ = [f"{c.line()} as measured, but at worst {w.line()}"
                     for c, w in judged if w.verdict != slo_mod.PASS and c.verdict != slo_mod.FAIL]
            if open_:
                raise InfrastructureError(f"{self.held_back}: {NOT_RUNNING}, and what they did not send could hide "
                                          "a breach: " + "; ".join(open_))
            checks = [w if w.verdict == slo_mod.PASS else c for c, w in judged]
        self.checks = checks
        return self.checks

    def require_sent(self) -> None:
        """InfrastructureError when the client was held back: for readers of the trials' values (the
        controls), which a gap leaves unknown."""
        if self.held_back:
            raise InfrastructureError(f"{self.held_back}: {NOT_RUNNING}, so an outage that short would not be seen")

    @property
    def failed(self) -> list:
        return [c for c in self.checks if c.verdict != slo_mod.PASS]

    def summary(self) -> list[str]:
        """A line per metric over the trials (P50, max) and a line per check."""
        def fmt(name, x):
            unit = _unit(name)
            if unit == "1":
                return f"{x * 100:.2f}%"
            if unit == "count":
                return f"{x:.0f}"
            return "inf" if math.isinf(x) else f"{x * 1e3:.1f} ms"
        lines = [f"{self.action}: {len(self.trials)} trials, window {self.window:.2f} s"
                 + (" (emulated)" if self.emulated else "") + f": {self.description}"]
        rows = [(name, False) for name in (*metrics.SERIES, "rtt_before", "rtt_during", "send_gap")]
        if self.held_back:
            lines.append(f"  held back: {self.held_back}; judged as measured and at worst over the gaps")
            rows += [(name, True) for name in metrics.SERIES]
        for name, worst in rows:
            v = self.series(name, worst)
            v = v[~np.isnan(v)]
            if len(v):
                lines.append(f"  {name}{' at worst' if worst else ''}: P50 {fmt(name, float(np.median(v)))}, "
                             f"max {fmt(name, float(v.max()))} (per trial: {', '.join(fmt(name, float(x)) for x in v)})")
        return lines + [c.line() for c in self.checks]

    def numbers(self, confidence: float) -> dict:
        """What studies.json keeps: each trial's marks and metrics, each statistic as [value, lo, hi, n]."""
        def num(x):
            return float(x) if math.isfinite(x) else str(x)
        return {"action": self.action, "emulated": self.emulated, "window_s": self.window,
                "intervals_s": {"udp": UDP_INTERVAL_S, "held": HELD_INTERVAL_S, "new": NEW_INTERVAL_S, "dns": DNS_INTERVAL_S},
                # the held probes' own count of connections that died under them, over the whole study
                "connections_lost": {k: s.meta.get("connections_lost") for k, s in self.samples.items() if k.startswith("held-")},
                # where the new connections given up were, over the whole study (netslo.traffic.probes.tcp.GIVEN_UP)
                "new_given_up": self.samples["new"].meta.get("given_up") if "new" in self.samples else None,
                "held_back": self.held_back,
                "trials": [{"t0_ns": t.t0_ns, "marks": t.marks, **{k: num(v) for k, v in t.values.items()},
                            **({"at_worst": {k: num(v) for k, v in t.bounds.items()}} if t.bounds else {})}
                           for t in self.trials],
                "estimates": {k: [num(e.value), num(e.lo), num(e.hi), e.n] for k, e in self.estimates(confidence).items()}}


def _unit(name: str) -> str:
    """The unit of metric ``name`` (``netslo.stats.disruption``) as the SLO file writes it (``slo.unit_of``);
    the reported rtt_before/rtt_during are durations."""
    return slo_mod.unit_of(f"{PREFIX}{name}.max")


def probe_specs(host: str, ports: dict, span_s: float, dns: ProbeSpec | None = None) -> dict:
    """Probe name -> ProbeSpec covering ``span_s`` s: udp, held-<i>, new, and dns from the template
    ``dns`` (its target and lookup options) when given (module doc)."""
    def spec(protocol, port, interval, **kw):
        return ProbeSpec(protocol, host, port, count=math.ceil(span_s / interval), interval=interval,
                         req_bytes=REQ_BYTES, resp_bytes=REQ_BYTES, wait=WAIT_S, **kw)
    out = {"udp": spec("udp", ports["udp"], UDP_INTERVAL_S)}
    for i in range(HELD):
        out[f"held-{i}"] = spec("tcp-rr", ports["tcp"], HELD_INTERVAL_S)
    out["new"] = spec("tcp-crr", ports["tcp"], NEW_INTERVAL_S, give_up=enforcement.GIVE_UP_S)
    if dns is not None:
        out["dns"] = dataclasses.replace(dns, count=math.ceil(span_s / DNS_INTERVAL_S), interval=DNS_INTERVAL_S,
                                         wait=max(WAIT_S, dns.dns.longest_s() if dns.dns else 0.0))
    return out


def run(cluster, client, server, ports: dict, action, trials: int, host: str | None = None,
        dns: ProbeSpec | None = None) -> Study:
    """``trials`` runs of ``action`` (``netslo.providers.disruption.Action``) while the probes run from
    ``client`` to ``server`` (its responders' ``ports``; ``host``: the address to send to, default the
    server pod's IP); ``dns``: a dns ProbeSpec naming the DNS server and what to ask (count and
    interval are the study's), or None for no lookups. A probe that began sending after the first
    trial had started (a slow exec on a loaded cluster) makes the study run once more, with a lead-in
    longer by 1.5 times its lateness; late again, it is an InfrastructureError. So does a client held
    back for more than ``MAX_SEND_GAP_S`` in a trial (a window it did not measure): the study runs once
    more, and held back again its trials carry their worst case too (``Trial.bounds``) and ``held_back``
    says how: ``Study.judge`` decides whether the gaps matter."""
    if trials < 1:
        raise ValueError(f"trials: value {trials!r} — expected >= 1")
    if action.target is not None:     # the action's own target (a drain's Service)
        host, ports = action.target
    t = time.monotonic()
    cluster.exec_agent(client, ["probe", "--help"], timeout=60.0)   # the probes imported before the lead-in
    # the probes start at once, each through its own exec: wait for as many as one after another, and
    # for longer than two real probes took to start, send and be answered one after the other
    lead_in = max(LEAD_IN_S, LEAD_IN_EXECS * (time.monotonic() - t))
    lead_in = max(lead_in, LEAD_IN_TRIES * await_target(cluster, client, host or server.ip, ports))
    samples, done = _study(cluster, client, server, ports, action, trials, host, dns, lead_in)
    late = _late_ns(samples, done)
    if late > 0:      # (kind + Calico, 2026-12-02: six probes began up to 2.2 s after they were asked)
        lead_in += 1.5 * late * 1e-9 + LEAD_IN_S
        samples, done = _study(cluster, client, server, ports, action, trials, host, dns, lead_in)
    held_back = _measure(samples, done, action)
    if held_back:     # the client was held back once: the study is measured once more
        k, gap = held_back
        progress.note(f"disruption {action.name}: the client sent nothing for {gap * 1e3:.0f} ms in trial {k} "
                      f"(at most {MAX_SEND_GAP_S * 1e3:g} ms): measured once more")
        samples, done = _study(cluster, client, server, ports, action, trials, host, dns, lead_in)
        again = _measure(samples, done, action)
        if again:
            k2, gap2 = again
            return Study(action.name, action.description, action.emulated, done, action.window, samples, held_back=(
                f"the client pod {client.name} on node {client.node} sent no UDP request for "
                f"{gap2 * 1e3:.0f} ms in trial {k2} of {action.name}, and {gap * 1e3:.0f} ms in trial {k} of the "
                f"run before (at most {MAX_SEND_GAP_S * 1e3:g} ms expected at one every {UDP_INTERVAL_S * 1e3:g} ms)"))
    return Study(action.name, action.description, action.emulated, done, action.window, samples)


def _measure(samples: dict, done: list, action) -> tuple[int, float] | None:
    """Give each trial of ``done`` its metrics from ``samples`` (and, held back, their worst case);
    (trial number, send gap in s) of the first whose client sent no UDP request for longer than
    ``MAX_SEND_GAP_S``, else None.
    InfrastructureError when a probe did not run through every window."""
    _covered(samples, done, action.window)
    if not action.one_responder:      # a replaced responder's report covers only its own part of the run
        samples["udp"].rows["srv_seen"] = -1
    held = [samples[f"held-{i}"] for i in range(HELD)]
    intervals = {"udp": UDP_INTERVAL_S, "new": NEW_INTERVAL_S, "dns": DNS_INTERVAL_S}
    for k, t in enumerate(done, 1):
        t.values = metrics.window(samples["udp"], held, samples["new"], t.t0_ns, action.window, BEFORE_S,
                                  samples.get("dns"))
        t.bounds = metrics.held_back_bounds(samples["udp"], held, samples["new"], t.t0_ns, action.window, BEFORE_S,
                                            samples.get("dns"), MAX_SEND_GAP_S, intervals) \
            if t.values["send_gap"] > MAX_SEND_GAP_S else None
    return next(((k, t.values["send_gap"]) for k, t in enumerate(done, 1) if t.bounds is not None), None)


def await_target(cluster, client, host: str, ports: dict, timeout: float = TARGET_AWAIT_S) -> float:
    """Return once ``host`` answers one UDP request and one new TCP connection (each try a new source
    port) from ``client``: the s the two answered probes took, start to end; InfrastructureError naming
    what still failed after ``timeout`` s."""
    tries = {"udp": ProbeSpec("udp", host, ports["udp"], count=1, interval=0.01, wait=1.0),
             "tcp": ProbeSpec("tcp-crr", host, ports["tcp"], count=1, interval=0.01, wait=1.0,
                            give_up=enforcement.GIVE_UP_S)}
    took, failing = await_answers(lambda spec: cluster.probe(client, spec), tries, timeout)
    if failing:
        raise InfrastructureError(f"the study's target {host} did not answer from pod {client.name} within "
                                  f"{timeout:g} s (a Service not yet programmed on node {client.node}, or the path down): "
                                  + "; ".join(f"{n} port {ports[n]}: {w}" for n, w in failing.items()))
    return took


def _study(cluster, client, server, ports, action, trials, host, dns, lead_in) -> tuple[dict, list]:
    """One run of the probes with the trials inside it: (probe name -> samples, trials)."""
    span = lead_in + trials * (BEFORE_S + action.window + action.restore_s) * 1.1 + TAIL_S
    specs = probe_specs(host or server.ip, ports, span, dns)
    # the action breaks this process's streams to the pod: probes of their own (read afterwards)
    start = cluster.probe_detached if action.detached_probes else cluster.probe_in_thread
    collectors = {n: start(client, s) for n, s in specs.items()}
    box: dict = {}
    done: list[Trial] = []
    current = 0   # the trial under way (0: before the first)
    try:
        time.sleep(lead_in)
        for k in range(trials):
            time.sleep(BEFORE_S)
            current = k + 1
            progress.note(f"disruption {action.name}: trial {current}/{trials}")
            t0 = time.monotonic_ns()
            marks = action.run() or {}
            done.append(Trial(t0, marks))
            took = (time.monotonic_ns() - t0) * 1e-9
            if took > action.window:   # its window ended before it did: what it did is not all in it
                raise InfrastructureError(f"action {action.name} took {took:.1f} s, longer than its "
                                          f"{action.window:g} s window (trial {len(done)})")
            time.sleep(max(0.0, action.window - (time.monotonic_ns() - t0) * 1e-9))
            if action.restore is not None:   # outside every window: the next trial's BEFORE_S follows it
                r0 = time.monotonic_ns()
                done[-1].marks["restore"] = action.restore() or {}
                took = (time.monotonic_ns() - r0) * 1e-9
                if took > action.restore_s:
                    raise InfrastructureError(f"action {action.name}'s restore took {took:.1f} s, longer than "
                                              f"its {action.restore_s:g} s (trial {len(done)})")
    except BaseException as e:
        where = f"in trial {current}/{trials}" if current else "before its first trial"
        progress.note(f"disruption {action.name}: stopped {where} ({e}); "
                      f"waiting for its probes to end (at most {span + WAIT_S + 60:.0f} s)")
        raise
    finally:
        for name, collect in collectors.items():   # one after another: each waits for its own end
            try:
                box[name] = collect(span + WAIT_S + 120)
            except BaseException as e:   # handed to the caller below
                box[f"error:{name}"] = e
    errors = {k: v for k, v in box.items() if k.startswith("error:")}
    if errors:
        name, e = next(iter(errors.items()))
        raise InfrastructureError(f"the {name[6:]} probe of the disruption study failed: {e}") from e
    return {k: box[k] for k in specs}, done


def _sends(s) -> tuple[int, int] | None:
    """(first, last) user-space send time (ns) of a probe's samples, None when it sent nothing."""
    send = s.rows["send_app_ns"]
    send = send[send >= 0]
    return (int(send.min()), int(send.max())) if len(send) else None


def _late_ns(samples: dict, trials: list) -> int:
    """ns by which the latest-starting probe began after the first trial's t0 - BEFORE_S (<= 0: in time;
    a probe that sent nothing counts as very late)."""
    first = trials[0].t0_ns - int(BEFORE_S * 1e9)
    return max((span[0] if (span := _sends(s)) else 2**62) for s in samples.values()) - first


def _covered(samples: dict, trials: list, window: float) -> None:
    """InfrastructureError unless every probe sent before the first trial's t0 - BEFORE_S and after
    the last trial's window: an outage must be measured, never a probe that was not running."""
    first = trials[0].t0_ns - int(BEFORE_S * 1e9)
    last = trials[-1].t0_ns + int(window * 1e9)
    for name, s in samples.items():
        span = _sends(s)
        if span is None or span[0] > first or span[1] < last:
            raise InfrastructureError(
                f"the {name} probe did not run through every trial (its sends "
                + (f"{(span[0] - first) / 1e6:.0f} ms after the first trial's start, "
                   f"{(last - span[1]) / 1e6:.0f} ms before the last one's end)" if span else "are missing)")
                + ": raise the lead-in")
