"""The idle guard (netslo.slo.idle_guard) and the sender's wait (timing.sleep_until): ticker threads run
on every CPU while a slow-paced measurement and its time checks run, and only then; they stop when it
ends; a send is never early. Real threads and clocks, a replayed probe."""

import asyncio
import os
import threading
import time

import pytest

from netslo.slo import idle_guard, runner
from netslo.slo.idle_guard import IdleGuard
from netslo.slo.scenario import Scenario
from netslo.traffic import clock as timing
from tests.unit.test_stalls import MS, SERVER, SPEC, Replay, _run, _starved


def _guards() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("netslo-idle-guard-"))


def test_a_guard_ticks_on_every_cpu_of_the_process_and_leaves_no_thread():
    with IdleGuard(tick_s=0.001) as g:
        assert _guards() == sorted(f"netslo-idle-guard-{c}" for c in os.sched_getaffinity(0))
        time.sleep(0.2)
    assert _guards() == []
    assert set(g.ticks) == set(os.sched_getaffinity(0))
    assert all(n >= 20 for n in g.ticks.values()), g.ticks    # 200 ms of 1 ms ticks, however slow the machine


def test_a_tick_outside_its_range_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^tick_s: value 0.5 — expected a duration in \(0, 0.1\] s$"):
        IdleGuard(tick_s=0.5)


@pytest.mark.parametrize("interval, guarded", [(0.010, False), (0.050, False), (0.100, True), (1.0, True)])
def test_the_runner_guards_slow_paced_measurements_and_their_time_checks_only(interval, guarded):
    c = Replay(_starved(), _run(lambda t: t + MS // 2, n=2000))
    seen = []
    probe = c.probe
    c.probe = lambda client, spec: (seen.append(bool(_guards())), probe(client, spec))[1]
    out = runner.run(c, None, SERVER, {"udp": 1}, Scenario("cross-node", "udp", "64b", interval=interval), SPEC)
    assert len(seen) == 5 and seen == [guarded] * 5           # 2 measurements, 3 check runs
    assert ("idle_guard" in out.environment) == guarded
    assert _guards() == []
    assert idle_guard.guarded(interval) == guarded


def test_sleep_until_is_never_early_and_ends_the_long_wait_short_of_the_deadline():
    slept = []
    real = asyncio.sleep

    async def record(d):
        slept.append(d)
        await real(d)

    async def main():
        asyncio.sleep = record
        try:
            target = timing.now_ns() + 300 * MS
            await timing.sleep_until(target)
            return timing.now_ns() - target
        finally:
            asyncio.sleep = real

    late = asyncio.run(main())
    assert late >= 0
    assert slept[0] == pytest.approx(0.3 - timing.FINAL_SLEEP_S, abs=0.01)   # the long part stops short
    # a loaded machine may wake the long sleep late enough that nothing is left to sleep; the
    # rest, when there is one, is short sleeps (the next test makes sure there is one)
    assert all(d <= 2 * timing.FINAL_SLEEP_S for d in slept[1:])


@pytest.mark.parametrize("woke_ms, sleeps_ms", [
    (-1.0, [298.0, 3.0]),       # woke 1 ms early: the rest is one short sleep
    (-0.25, [298.0, 2.25]),
    (+0.5, [298.0, 1.5]),       # woke late, but short of the deadline
    (+2.5, [298.0]),            # woke past the deadline: nothing left to sleep
])
def test_sleep_until_sleeps_what_an_early_wake_up_left_in_short_sleeps(monkeypatch, woke_ms, sleeps_ms):
    """On a clock of its own (ns), a sleep that wakes ``woke_ms`` off its length (the first) or
    exactly (the rest): the waits are the long part short of the deadline, then what is left."""
    clock = [0]
    slept = []

    async def fake_sleep(d):
        slept.append(d)
        clock[0] += round(d * 1e9) + (round(woke_ms * MS) if len(slept) == 1 else 0)

    monkeypatch.setattr(timing, "now_ns", lambda: clock[0])
    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    asyncio.run(timing.sleep_until(300 * MS))
    assert [round(d * 1e3, 6) for d in slept] == sleeps_ms
    assert clock[0] >= 300 * MS
