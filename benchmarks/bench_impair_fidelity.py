"""Impairment fidelity: configured vs realized netem, measured with the isochronous UDP probe.

    sudo python benchmarks/bench_impair_fidelity.py [--count 20000] [--interval 1ms] [--json out.json]

Runs on the host kernel if it has sch_netem, else inside user-mode-linux (as the gate does). Each
configuration is applied on the client pod's egress (client -> server one-way delay, exact on the
shared clock) and probed with ``--count`` packets of 64 bytes. Targets (issue 3):
  delay     realized P50 (one-way minus the unimpaired baseline P50) within ±0.2 ms of the configured P50
  jitter    realized sd (baseline variance removed) within 15 % of the configured distribution's sd
  loss/dup  realized count inside the 99 % binomial interval of the configured probability (n >= 20 000)
  reorder   share of packets that skipped the delay inside the 99 % binomial interval
Prints one table row per configuration; exit code 1 if any target is missed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netslo.core import units  # noqa: E402
from netslo.impair import capability, netem, verify  # noqa: E402
from netslo.impair.spec import parse  # noqa: E402

CONFIGS = [
    ("delay 10ms", {"delay": "10ms"}),
    ("delay 10ms ±2ms normal", {"delay": "10ms", "jitter": "2ms", "distribution": "normal"}),
    ("delay 50ms", {"delay": "50ms"}),
    ("loss 1%", {"loss": "1%"}),
    ("loss 0.1%", {"loss": "0.1%"}),
    ("duplicate 1%", {"duplicate": "1%"}),
    ("reorder 25% (delay 10ms)", {"delay": "10ms", "reorder": "25%"}),
]
P50_TARGET_S = 0.2e-3
SD_TARGET = 0.15


def cluster():
    if capability.detect().netem:
        from netslo.impair.netem import NetemController
        from netslo.providers.netns.cluster import NetnsCluster
        c = NetnsCluster(nodes=2)
        return c, NetemController(c), c.environment()["kernel"], None
    ok, why = capability.uml_available()
    if not ok:
        sys.exit(f"no netem: host lacks sch_netem and user-mode-linux is unusable ({why})")
    from netslo.providers.netns.uml import UmlCluster
    c = UmlCluster(nodes=2)
    return c, c.impairer, f"uml {c.ready['kernel']}", c.boot_seconds


def row(name: str, imp, s, base_up: np.ndarray) -> dict:
    up = verify.one_way(s, "up")
    out = {"config": name, "n": len(s), "received": int((s.rows["recv_ns"] >= 0).sum())}
    checks = []
    if imp.delay:
        mask = up if not imp.reorder else up[up >= imp.delay / 2]
        want = float(np.median(netem.delay_model(imp)))
        got = float(np.median(mask) - np.median(base_up))
        out.update(p50_configured_ms=want * 1e3, p50_realized_ms=got * 1e3, p50_raw_ms=float(np.median(mask)) * 1e3)
        checks.append(abs(got - want) <= P50_TARGET_S)
        if imp.jitter:
            want_sd = float(netem.delay_model(imp).std())
            got_sd = math.sqrt(max(float(mask.var()) - float(base_up.var()), 0.0))
            out.update(sd_configured_ms=want_sd * 1e3, sd_realized_ms=got_sd * 1e3)
            checks.append(abs(got_sd - want_sd) <= SD_TARGET * want_sd)
    if imp.loss:
        lost, n = verify.loss_counts(s, "up")
        lo, hi = verify.binomial_interval(n, imp.loss)
        out.update(loss_configured=imp.loss, loss_realized=lost / n, loss_interval=f"{lo}..{hi} of {n}")
        checks.append(lo <= lost <= hi)
    if imp.duplicate:
        rec = out["received"]
        dups = int(s.rows["dups"].sum())
        lo, hi = verify.binomial_interval(rec, imp.duplicate)
        out.update(dup_configured=imp.duplicate, dup_realized=dups / rec, dup_interval=f"{lo}..{hi} of {rec}")
        checks.append(lo <= dups <= hi)
    if imp.reorder:
        skipped = int((up < imp.delay / 2).sum())
        lo, hi = verify.binomial_interval(len(up), imp.reorder_share)
        from netslo.stats.analysis import analyze
        out.update(reorder_configured=imp.reorder_share, reorder_realized=skipped / len(up),
                   reorder_interval=f"{lo}..{hi} of {len(up)}", reorder_count=analyze(s).counts["reordered"])
        checks.append(lo <= skipped <= hi)
    out["ok"] = all(checks)
    return out


def fmt(r: dict) -> str:
    cfg, real = [], []
    if "p50_configured_ms" in r:
        cfg.append(f"P50 {r['p50_configured_ms']:.3f}ms")
        real.append(f"P50 {r['p50_realized_ms']:.3f}ms (raw {r['p50_raw_ms']:.3f})")
    if "sd_configured_ms" in r:
        cfg.append(f"sd {r['sd_configured_ms']:.3f}ms")
        real.append(f"sd {r['sd_realized_ms']:.3f}ms")
    for k in ("loss", "dup", "reorder"):
        if f"{k}_configured" in r:
            cfg.append(f"{k} {units.format_percent(r[k + '_configured'])}")
            real.append(f"{k} {units.format_percent(r[k + '_realized'])} [{verify.COUNT_CONFIDENCE:.1%}: {r[k + '_interval']}]")
    return (f"{r['config']:<26} | {', '.join(cfg):<32} | {', '.join(real):<58} | {r['received']:>6}/{r['n']:<6} | "
            f"{'ok' if r['ok'] else 'MISSED'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--interval", default="1ms")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    interval = units.duration(a.interval, "--interval")
    t0 = time.monotonic()
    c, impairer, kernel, boot = cluster()
    rows = []
    try:
        server = c.add_pod("server", "node0")
        client = c.add_pod("client", "node1")
        ports = c.start_responders(server, ("udp",))
        base = verify.measure(c, client, server, ports, count=a.count, interval=interval)
        base_up = verify.one_way(base, "up")
        print(f"kernel {kernel}" + (f" (booted in {boot:.2f} s)" if boot else "") +
              f"; {a.count} probes of 64 B every {units.format_duration(interval)}; baseline one-way P50 "
              f"{np.median(base_up) * 1e3:.3f} ms, sd {base_up.std() * 1e3:.3f} ms")
        print(f"{'configured':<26} | {'target':<32} | {'realized':<58} | {'answered':<13} | verdict")
        for name, doc in CONFIGS:
            imp = parse(doc)
            impairer.apply(client, imp)
            try:
                s = verify.measure(c, client, server, ports, count=a.count, interval=interval,
                                   wait=1.0 + 2 * imp.delay)
            finally:
                impairer.clear()
            rows.append(row(name, imp, s, base_up))
            print(fmt(rows[-1]), flush=True)
    finally:
        c.close()
    print(f"total {time.monotonic() - t0:.0f} s")
    if a.json:
        Path(a.json).write_text(json.dumps({"kernel": kernel, "count": a.count, "rows": rows}, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


def test_impair_fidelity(capsys):
    """Under ``pytest benchmarks -s``: print the fidelity table (numbers; the script's exit code judges).

    NETSLO_FIDELITY_COUNT sets the probes per configuration (default 20000)."""
    import os

    import pytest
    if not (capability.detect().netem or capability.uml_available()[0]):
        pytest.skip("no netem: host lacks sch_netem and user-mode-linux is unusable")
    code = main(["--count", os.environ.get("NETSLO_FIDELITY_COUNT", "20000")])
    print(f"fidelity targets {'met' if code == 0 else 'MISSED'}")


if __name__ == "__main__":
    sys.exit(main())
