"""What an action (a CNI agent restart, a DROP, a drain) did to traffic: the disruption metrics of one
trial's window, from the probes that ran through it (docs/metrics.md, "Disruption").

Clock points: ``t0_ns`` is CLOCK_MONOTONIC in the measuring process just before the action started;
requests are placed by their user-space send time (``send_app_ns``), the same clock wherever the
probe runs on this kernel (the embedded provider, kind). A trial's window is ``[t0, t0 + window)``;
only requests sent in it count. Resolution: each probe's send interval.

* ``outage`` (s): the longest run of consecutive open-loop UDP requests without an answer, from the
  send of its first request to the send of the next answered one (k requests x interval); 0 when
  none was lost; +inf when the run reaches the window's end (not over within the window).
* ``outage_up`` / ``outage_down`` (s): the same per direction. Up: the requests the responder never
  saw. Down: among the requests the responder saw, the longest run of them whose answer did not
  come (requests it did not see neither break nor end such a run). NaN when the responder's
  end-of-run report is missing (which requests it saw is then unknown).
* ``loss`` (fraction): UDP requests of the window not answered.
* ``recovery`` (s): from t0 to the send of the first request of the first *clean second* (UDP
  requests answered without a gap for ``CLEAN_S``) after the window's first lost request; 0 when
  nothing was lost; +inf when no such second fits in the window.
* ``stall`` (s): the longest an answer on an established (held) connection took, over the
  requests sent on them in the window, user-space send to answer (TCP retransmits a segment lost in an outage after its
  retransmission timeout, which backs off, so a connection can stall longer than the outage).
* ``resets`` (count): held connections that lost a request sent in the window. TCP loses nothing on a
  live connection: a lost request means the connection died (reset, closed) under it.
* ``conn_fail`` (count): new connections (one request each) sent in the window and not answered:
  refused, reset, or given up (no answer in the client's kernel ``give_up`` s after its connect:
  ``netslo.traffic.probes.tcp``).
* ``dns_timeouts`` (count): DNS lookups sent in the window that were not answered at their first
  send (a query send expired and was resent, or no answer came); NaN without a DNS probe.
* ``rtt_before`` / ``rtt_during`` (s): P50 RTT of the UDP requests answered in the ``before`` s
  before t0, and from t0 until recovery (the whole window if it did not recover).
* ``send_gap`` (s): the longest time in the window without a UDP request sent (t0 to the first send,
  or between two sends): the resolution the window was actually measured at. An open-loop sender
  that was frozen (its node paused, its process starved) sends late, all at once, so requests of a
  lost stretch would be missing, not lost: an outage shorter than ``send_gap`` may not have been seen.

``held_back_bounds`` gives a window's metrics at their worst over what its gaps could hide (every UDP
request the client did not send in a gap longer than a given one counted as lost, and so on); the
measured values are the best case, so a verdict both agree on holds whatever the gap hid.
"""

from __future__ import annotations

import math

import numpy as np

from netslo.stats import dns as dns_stats
from netslo.stats.samples import SampleSet

CLEAN_S = 1.0     # a clean second: this long without an unanswered request
SERIES = ("outage", "outage_up", "outage_down", "loss", "recovery", "stall", "resets", "conn_fail", "dns_timeouts")


def _ordered(samples: SampleSet) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(send ns, answered, responder saw: 1/0/-1, user-space RTT ns) of the sent requests, by send
    time. User-space times: a held connection's kernel TX stamp is taken when a queued request
    finally leaves, which would hide the stall behind it."""
    r = samples.rows
    sent = r["send_app_ns"] >= 0
    order = np.argsort(r["send_app_ns"][sent], kind="stable")
    send = r["send_app_ns"][sent][order]
    got = (r["recv_ns"][sent] >= 0)[order]
    seen = r["srv_seen"][sent][order]
    rtt = (r["recv_app_ns"][sent] - r["send_app_ns"][sent])[order]
    return send, got, seen, rtt


def longest_gap(send_ns: np.ndarray, lost: np.ndarray) -> float:
    """Seconds of the longest run of consecutive ``lost`` requests: the send of its first to the send
    of the next one not lost; +inf when a run reaches the last request, 0 without one."""
    if not lost.any():
        return 0.0
    edges = np.diff(np.concatenate([[0], lost.astype(np.int8), [0]]))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)   # stop: first not lost after
    if stops[-1] >= len(send_ns):
        return math.inf
    return float((send_ns[stops] - send_ns[starts]).max()) * 1e-9


def recovery(send_ns: np.ndarray, lost: np.ndarray, t0_ns: int, clean_s: float = CLEAN_S) -> float:
    """Seconds from ``t0_ns`` to the first request of the first run of answered requests after the
    window's first lost one that covers ``clean_s`` (first to last send plus one send interval): the
    first clean second once the disruption began. 0 without a lost request, +inf when no such run
    fits in the window. ``send_ns`` ascending, at or after t0."""
    if not lost.any():
        return 0.0
    if len(send_ns) < 2:
        return math.inf
    step = float(np.median(np.diff(send_ns)))
    first_lost = int(np.argmax(lost))
    edges = np.diff(np.concatenate([[0], (~lost).astype(np.int8), [0]]))
    for b, e in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1):
        if b > first_lost and send_ns[e] - send_ns[b] + step >= clean_s * 1e9:
            return (send_ns[b] - t0_ns) * 1e-9
    return math.inf


def _gaps(send_ns: np.ndarray, t0_ns: int, end_ns: int, longer_than_s: float) -> list[tuple[int, int]]:
    """(start, end) ns of the stretches of ``[t0_ns, end_ns)`` longer than ``longer_than_s`` in which no
    request of ``send_ns`` (ascending) was sent: from t0 or a send to the next send or the window's end."""
    s = send_ns[(send_ns >= t0_ns) & (send_ns < end_ns)]
    edges = np.concatenate([[t0_ns], s, [end_ns]])
    k = np.flatnonzero(np.diff(edges) > longer_than_s * 1e9)
    return [(int(edges[i]), int(edges[i + 1])) for i in k]


def _filled(send, got, seen, rtt, gaps: list, step_ns: int):
    """The ordered UDP arrays with a request every ``step_ns`` inside each of ``gaps``, not answered and
    not seen by the responder: what the client would have sent had it not been held back, at worst."""
    extra = np.concatenate([np.arange(a + step_ns, b, step_ns, dtype=np.int64) for a, b in gaps] or [np.empty(0, np.int64)])
    order = np.argsort(np.concatenate([send, extra]), kind="stable")
    n = len(extra)
    return (np.concatenate([send, extra])[order], np.concatenate([got, np.zeros(n, bool)])[order],
            np.concatenate([seen, np.zeros(n, seen.dtype)])[order], np.concatenate([rtt, np.zeros(n, rtt.dtype)])[order])


def held_back_bounds(udp: SampleSet, held: list[SampleSet], new: SampleSet | None, t0_ns: int, window_s: float,
                     before_s: float, dns: SampleSet | None, longer_than_s: float, intervals: dict) -> dict:
    """The metrics of ``window`` at their worst over what the client's gaps could hide: in every
    stretch of the window longer than ``longer_than_s`` s without a UDP request sent, each request
    the probes would have sent (``intervals``: s per probe, keys udp/new/dns) counted as lost or
    failed, and every answer on a held connection as late as the longest stretch more (``stall``).
    Held connections that died in a stretch still lose the requests after it (``resets`` as measured).
    Equal to ``window`` when the client sent all along."""
    end_ns = t0_ns + int(window_s * 1e9)
    send, got, seen, rtt = _ordered(udp)
    gaps = _gaps(send, t0_ns, end_ns, longer_than_s)
    out = window(udp, held, new, t0_ns, window_s, before_s, dns, _arrays=_filled(
        send, got, seen, rtt, gaps, int(intervals["udp"] * 1e9)))
    del out["send_gap"]         # the filled stretches are not sends
    unseen = [(b - a) * 1e-9 for a, b in gaps]
    out["stall"] += max(unseen, default=0.0)
    for key, probe, present in (("conn_fail", "new", new is not None), ("dns_timeouts", "dns", dns is not None)):
        if present:
            out[key] += float(sum(math.floor(u / intervals[probe]) for u in unseen))
    return out


def window(udp: SampleSet, held: list[SampleSet], new: SampleSet | None, t0_ns: int, window_s: float,
           before_s: float, dns: SampleSet | None = None, _arrays: tuple | None = None) -> dict:
    """The metrics (module doc) of the window ``[t0_ns, t0_ns + window_s)``; ``before_s``: the span
    before t0 whose RTT is ``rtt_before``. Durations in s, loss a fraction, counts whole numbers.
    ``_arrays``: the ordered UDP arrays to use instead of ``udp``'s (``held_back_bounds``)."""
    end_ns = t0_ns + int(window_s * 1e9)
    send, got, seen, rtt = _arrays if _arrays is not None else _ordered(udp)
    lo, hi = np.searchsorted(send, [t0_ns, end_ns])
    if hi <= lo:
        raise ValueError(f"window: no UDP request sent in the {window_s:g} s after t0 (the probe did not run through it)")
    s, g, v = send[lo:hi], got[lo:hi], seen[lo:hi]
    out = {"outage": longest_gap(s, ~g), "loss": float((~g).mean()),
           "send_gap": float(max(s[0] - t0_ns, np.diff(s).max(initial=0))) * 1e-9}
    if (v < 0).any():
        out["outage_up"] = out["outage_down"] = math.nan
    else:
        out["outage_up"] = longest_gap(s, v == 0)
        saw = v == 1
        out["outage_down"] = longest_gap(s[saw], ~g[saw])
    out["recovery"] = recovery(s, ~g, t0_ns)
    b0 = np.searchsorted(send, t0_ns - int(before_s * 1e9))
    before = rtt[b0:lo][got[b0:lo]]
    until = hi if math.isinf(out["recovery"]) else np.searchsorted(send, t0_ns + int(out["recovery"] * 1e9))
    during = rtt[lo:max(until, lo + 1)][got[lo:max(until, lo + 1)]]
    out["rtt_before"] = float(np.median(before)) * 1e-9 if len(before) else math.nan
    out["rtt_during"] = float(np.median(during)) * 1e-9 if len(during) else math.nan
    stall, resets = 0.0, 0
    for h in held:
        hs, hg, _, hr = _ordered(h)
        a, b = np.searchsorted(hs, [t0_ns, end_ns])
        if b > a:
            resets += int((~hg[a:b]).any())
            answered = hr[a:b][hg[a:b]]
            if len(answered):
                stall = max(stall, float(answered.max()) * 1e-9)
    out["stall"], out["resets"] = stall, float(resets)
    if new is not None:
        ns, ng, _, _ = _ordered(new)
        a, b = np.searchsorted(ns, [t0_ns, end_ns])
        out["conn_fail"] = float((~ng[a:b]).sum())
    if dns is not None:
        r = dns.rows
        hit = r["recv_ns"] < 0
        resent = dns_stats.retried(dns.meta.get("per_row", {}), len(r))
        if resent is not None:
            hit = hit | resent
        sent = r["send_app_ns"]
        out["dns_timeouts"] = float((hit & (sent >= t0_ns) & (sent < end_ns)).sum())
    return out
