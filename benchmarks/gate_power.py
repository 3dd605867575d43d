"""False alarms and power of the regression gate, measured on real runs of an unchanged system.

    python benchmarks/gate_power.py RUNS_DIR [RUNS_DIR ...] [--baseline-runs 10] [--shifts ...]

Each RUNS_DIR holds one results directory per run (results.json + samples/), all of the same
unchanged system, e.g. made by repeating

    python -m pytest -m cni netslo/gate/test_latency.py --netslo-results RUNS_DIR/run01

For every run i >= K of a directory, the K runs before it are the baseline (``--baseline-runs``,
K = 1 gives the single-run block-bootstrap mode) and run i is the current run:

  * A/A: run i as measured. A false alarm is a gate that fails (any test x metric regressed).
  * Injected shifts: run i with a known regression put into the raw samples of every test:
      scale10   every RTT x 1.10                         (+10 % everywhere, P99 included)
      tail10    2 % of requests at random slowed to 1.10 x the run's P99 (+10 % P99, P50 unchanged)
      add1ms    every RTT + 1 ms                         (a 1 ms slower path, e.g. one more hop)
      tail1ms   2 % of requests at random slowed to P99 + 1 ms (+1 ms P99, P50 unchanged)
      loss05    0.5 % of the answered requests, at random, become lost (+0.5 percentage points)
    Detection = the gate fails. Also reported: the share of tests flagged one by one.

``--synthetic N`` uses N synthetic runs of 16 tests instead (lognormal RTTs, 1000 requests, with a
run-to-run factor of ``--run-sd`` on the log scale): the statistics without this host's noise.
With ``--shape-from DIR`` their RTTs have the shape of this host's (see ``shaped_runs``): its tails,
a quieter runner's run-to-run spread. ``--confirm`` re-measures suspected tests as the plugin does.
``--definition round_trip`` judges the same runs with the responder's residence kept in the RTT (the
definition before 2026-11-27). Prints numbers (rates with 95 % Clopper-Pearson intervals), no pass/fail.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from netslo.report import regression as reg  # noqa: E402
from netslo.report.run_spread import INDEX_TEST  # noqa: E402
from netslo.report.series import received, rtt_by_seq  # noqa: E402
from netslo.stats import analysis as stats  # noqa: E402
from netslo.stats.delays import series_ns  # noqa: E402
from netslo.stats.samples import SampleSet, empty  # noqa: E402

SHIFTS = ("scale10", "tail10", "add1ms", "tail1ms", "loss05")


def runs_in(directory: Path) -> list[reg.Run]:
    return [reg.load(p.parent) for p in sorted(directory.glob("*/results.json"))]


def shifted(s: SampleSet, kind: str, rng) -> SampleSet:
    """A copy of ``s`` with the regression ``kind`` (see the module doc) injected."""
    rows = s.rows.copy()
    got = np.flatnonzero(received(s))
    rtt_ns = series_ns(s.chunks(), "rtt")     # per answered request, in row order, as the gate judges it
    start = rows["recv_ns"][got] - rtt_ns     # recv_ns = start + rtt: shifting rtt shifts recv_ns
    if kind in ("scale10", "add1ms"):
        new = np.round(rtt_ns * 1.1) if kind == "scale10" else rtt_ns + 1_000_000
        rows["recv_ns"][got] = start + new.astype(np.int64)
    elif kind in ("tail10", "tail1ms"):
        p99 = reg.nearest_rank(rtt_by_seq(s)[got], 99.0)
        target = p99 * 1.1 if kind == "tail10" else p99 + 1e-3
        pick = rng.choice(len(got), size=max(1, int(np.ceil(0.02 * len(got)))), replace=False)
        want = (target * rng.uniform(0.98, 1.02, len(pick)) * 1e9).astype(np.int64)
        rows["recv_ns"][got[pick]] = start[pick] + np.maximum(rtt_ns[pick], want)
    elif kind == "loss05":
        drop = got[rng.random(len(got)) < 0.005]
        rows["recv_ns"][drop] = -1
        rows["arrival"][drop] = -1
    elif kind != "none":
        raise ValueError(f"shift: value {kind!r} — expected one of none, {', '.join(SHIFTS)}")
    return SampleSet(rows, copy.deepcopy(s.meta))


def as_round_trip(run: reg.Run) -> reg.Run:
    """``run`` with its responders' stamps dropped from every set: its rtt is then the round trip with
    the responder's residence in it, netslo's rtt until 2026-11-27 (``--definition round_trip``)."""
    out = reg.Run(environment=run.environment, sources=run.sources)
    for t, parts in run.samples.items():
        for s, j in zip(parts, run.session_of.get(t, [0] * len(parts))):
            rows = s.rows.copy()
            rows["srv_rx_ns"] = rows["srv_tx_ns"] = -1
            out.add(t, SampleSet(rows, copy.deepcopy(s.meta)), j)
    return out


def pooled(runs: list[reg.Run]) -> reg.Run:
    """One Run holding every session of ``runs`` (session indices kept apart)."""
    out = reg.Run()
    for r in runs:
        offset = len(out.sources)
        out.environment += r.environment
        out.sources += r.sources or [f"run{offset}"]
        for t, parts in r.samples.items():
            for s, j in zip(parts, r.session_of.get(t, [0] * len(parts))):
                out.add(t, s, offset + j)
    return out


def with_shift(run: reg.Run, kind: str, rng, tests=None) -> reg.Run:
    """``run`` (only ``tests``, in that order, when given) with the regression ``kind`` injected."""
    out = reg.Run(environment=run.environment, sources=run.sources)
    for t in run.samples if tests is None else tests:
        for s in run.samples.get(t, []):
            out.add(t, shifted(s, kind, rng))
    return out


def answered(rtt_s: np.ndarray) -> SampleSet:
    """A UDP SampleSet of one answered request per RTT (s) on a 2 ms schedule, sent 30 µs late."""
    n = len(rtt_s)
    rows = empty(n)
    rows["sched_ns"] = np.arange(n, dtype=np.int64) * 2_000_000
    rows["send_ns"] = rows["sched_ns"] + 30_000
    rows["recv_ns"] = rows["send_ns"] + (rtt_s * 1e9).astype(np.int64)
    rows["arrival"] = np.arange(n)
    return SampleSet(rows, {"protocol": "udp"})


def synthetic_runs(count: int, run_sd: float, n: int = 1000, tests: int = 16, seed: int = 0) -> list[reg.Run]:
    """``count`` runs of ``tests`` tests: lognormal RTTs (median 100-250 µs, sigma 0.5) times a
    per-run, per-test factor exp(N(0, run_sd)) — run-to-run noise of a runner."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        run = reg.Run(environment=[{"run_id": f"synthetic{i}"}], sources=[f"synthetic{i}"])
        for k in range(tests):
            median = 100e-6 * (1 + 1.5 * k / tests) * np.exp(rng.normal(0.0, run_sd))
            run.add(f"synthetic[t{k:02d}]", answered(median * rng.lognormal(0, 0.5, n)))
        out.append(run)
    return out


def shaped_runs(count: int, run_sd: float, real: list[reg.Run], n: int, seed: int = 0) -> list[reg.Run]:
    """Like ``synthetic_runs`` but each test's RTTs have the shape measured on this host: drawn from
    the test's real RTTs divided by their run's median (pooled over ``real``), times the test's median
    and a per-run factor exp(N(0, run_sd)). This host's tails, a quieter runner's run-to-run spread."""
    rng = np.random.default_rng(seed)
    shapes, medians = {}, {}
    for t in sorted(set.intersection(*(set(r.samples) for r in real))):
        rtts = [rtt_by_seq(s)[received(s)] for r in real for s in r.samples[t]]
        shapes[t] = np.concatenate([x / np.median(x) for x in rtts if len(x)])
        medians[t] = float(np.median([np.median(x) for x in rtts if len(x)]))
    out = []
    for i in range(count):
        run = reg.Run(environment=[{"run_id": f"shaped{i}"}], sources=[f"shaped{i}"])
        for t, shape in shapes.items():
            run.add(t, answered(medians[t] * np.exp(rng.normal(0.0, run_sd)) * rng.choice(shape, n)))
        out.append(run)
    return out


def rate(k: int, n: int) -> str:
    """'k/n = r % (95 % CI lo-hi %)' with a Clopper-Pearson interval."""
    if not n:
        return "0/0"
    ci = stats.proportion(k, n, 0.95)
    return f"{k}/{n} = {k / n:.1%} (95% CI {ci.lo:.1%}-{ci.hi:.1%})"


def study(groups: list[list[reg.Run]], k: int, policy: reg.Policy, shifts, seed: int = 1,
          confirm: bool = False) -> dict:
    """{shift: (gate failures, cases, tests flagged, tests)} over every (K previous runs, run i).

    ``confirm``: as the pytest plugin does, tests suspected in run i are measured again and a
    regression must show in both; the re-measurement is the test's samples in run i+1 (so the last
    run of a directory is no case)."""
    rng = np.random.default_rng(seed)
    out = {}
    for kind in ("none",) + tuple(shifts):
        fails = cases = flagged = tests = noise = 0
        for runs in groups:
            for i in range(k, len(runs) - confirm):
                cur = runs[i] if kind == "none" else with_shift(runs[i], kind, rng)
                rep = reg.compare(pooled(runs[i - k:i]), cur, policy)
                if confirm:
                    # the re-measurement: the suspected tests' samples in the next run, same regression
                    rep = reg.confirm(rep, with_shift(runs[i + 1], kind, rng, reg.suspected(rep)))
                cases += 1
                fails += rep.failed
                names = {c.test for c in rep.comparisons if not c.test.startswith(INDEX_TEST)}
                tests += len(names)
                flagged += len({c.test for c in rep.regressions if not c.test.startswith(INDEX_TEST)})
                noise += any(c.verdict == reg.HOST_NOISE for c in rep.comparisons)
                if kind == "none" and rep.failed:
                    print("  false alarm:", "; ".join(f"{c.test.split('[')[-1].rstrip(']')} {c.metric} "
                                                      f"{c.baseline * 1e6:.0f}->{c.current * 1e6:.0f}"
                                                      f"{'us' if c.unit == 's' else 'e-6'} p={c.p_adj:.2g}"
                                                      for c in rep.regressions))
        out[kind] = (fails, cases, flagged, tests, noise)
        print(f"{kind:8s} gate failed {rate(fails, cases)}; tests flagged {rate(flagged, tests)}; "
              f"cases with host-noise set-asides {noise}", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", type=Path, nargs="*", help="directories of runs (each analysed on its own)")
    ap.add_argument("--synthetic", type=int, default=0, help="use N synthetic runs instead")
    ap.add_argument("--run-sd", type=float, default=0.02, help="synthetic run-to-run log-scale sd (0.02 = 2 %%)")
    ap.add_argument("--requests", type=int, default=1000, help="synthetic requests per test and run")
    ap.add_argument("--shape-from", type=Path, default=None,
                    help="with --synthetic: draw each test's RTT shape from the real runs in this directory")
    ap.add_argument("--baseline-runs", type=int, default=10, help="K previous runs form the baseline")
    ap.add_argument("--shifts", default=",".join(SHIFTS))
    ap.add_argument("--alpha", default=None)
    ap.add_argument("--confirm", action="store_true",
                    help="re-measure suspected tests (here: the next run's samples) as the plugin does")
    ap.add_argument("--definition", choices=("rtt", "round_trip"), default="rtt",
                    help="round_trip: judge the round trip with the responder in it (rtt until 2026-11-27)")
    a = ap.parse_args(argv)
    policy = reg.policy_from_text(alpha=a.alpha)
    if a.synthetic:
        groups = [shaped_runs(a.synthetic, a.run_sd, runs_in(a.shape_from), a.requests) if a.shape_from
                  else synthetic_runs(a.synthetic, a.run_sd, a.requests)]
    else:
        groups = [runs_in(d) for d in a.runs]
    if a.definition == "round_trip":
        groups = [[as_round_trip(r) for r in g] for g in groups]
    if not any(len(g) > a.baseline_runs for g in groups):
        print(f"need more than {a.baseline_runs} runs in a directory")
        return 2
    print(f"policy: alpha={policy.alpha:.0%} (Holm, family-wise) baseline_runs={a.baseline_runs} "
          f"mode={'run spread' if a.baseline_runs >= policy.spread_min_runs else 'block bootstrap'}; "
          f"runs per directory: {', '.join(str(len(g)) for g in groups)}; definition {a.definition}"
          + (f"; synthetic: run-to-run sd {a.run_sd:.0%}, {a.requests} requests per test"
             + (f", RTT shapes of {a.shape_from}" if a.shape_from else "") if a.synthetic else ""))
    study(groups, a.baseline_runs, policy, [s for s in a.shifts.split(",") if s], confirm=a.confirm)
    return 0


if __name__ == "__main__":
    sys.exit(main())
