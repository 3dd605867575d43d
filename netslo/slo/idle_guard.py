"""Keep this machine's CPUs out of long idle while a slow-paced probe runs.

A probe that sends once every 0.4-1 s leaves every CPU idle for most of a period. On a virtual
machine a vCPU that halted for that long can wake late: this project's CI runs (2-core KVM microVM,
2026-11-27 and -28) saw the WebSocket sender wake 5-7 ms after its 1 s sleeps, four measurements in a
row, while sleeps of 3 ms kept within 2 ms; the last run's RTT P50 was 8.1 ms (about 1 ms on a quiet
machine), so the send-interval sweep measured the host's wake-up, not the pod network (an infrastructure
error, never a verdict, but a red gate). The sweep exists for what *TCP* does after an idle period
(``tcp_slow_start_after_idle``), not for what the hypervisor does with an idle vCPU.

``IdleGuard`` runs one thread per CPU of this process's affinity, each pinned to its CPU and
sleeping ``TICK_S`` in a loop: no CPU of the machine halts for longer than a tick, at a cost of about
a thousand short wake-ups per second per CPU and no packets. It covers every process of this
kernel: the embedded provider's pods and a kind cluster's nodes; not the nodes of a remote
(``existing``) cluster. Holding the CPUs in a polling idle state instead (``/dev/cpu_dma_latency``
= 0, as cyclictest does) was measured and rejected: on this VM the hypervisor then took 33 ticks of
steal time per minute instead of 1, and the worst 1 s wake-up grew from 0.3 ms to 6.8 ms.
"""

from __future__ import annotations

import os
import threading

TICK_S = 0.001          # the longest a guarded CPU stays idle (s)
MIN_PERIOD_S = 0.100    # send periods (s) from which the runner guards a measurement


class IdleGuard:
    """Context manager: ticker threads on every CPU this process may run on, stopped on exit."""

    def __init__(self, tick_s: float = TICK_S):
        if not 0 < tick_s <= 0.1:
            raise ValueError(f"tick_s: value {tick_s!r} — expected a duration in (0, 0.1] s")
        self.tick_s = tick_s
        self.cpus = sorted(os.sched_getaffinity(0))
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.ticks: dict[int, int] = {}

    def _tick(self, cpu: int) -> None:
        os.sched_setaffinity(0, {cpu})   # pid 0 in a thread: this thread only
        n = 0
        while not self._stop.wait(self.tick_s):
            n += 1
        self.ticks[cpu] = n

    def __enter__(self) -> "IdleGuard":
        self._stop.clear()
        self._threads = [threading.Thread(target=self._tick, args=(c,), name=f"netslo-idle-guard-{c}", daemon=True)
                         for c in self.cpus]
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        self._threads = []

    def describe(self) -> str:
        """For the environment line of a report."""
        return (f"this machine's CPUs {','.join(map(str, self.cpus))} ticked every {self.tick_s * 1e3:g} ms "
                f"during sends >= {MIN_PERIOD_S * 1e3:g} ms apart")


def guarded(period_s: float | None) -> bool:
    """True when a measurement sending every ``period_s`` s is taken under an ``IdleGuard``."""
    return period_s is not None and period_s >= MIN_PERIOD_S
