"""Which metrics a protocol and provider can measure at all, known before anything is sent.

Only this decides that a threshold is *unsupported* (a skip with category ``capability``). A metric
that a capable probe did not produce because requests were lost or unanswered is missing data: its
check fails and says why (``missing_reason``), it never turns into a skip.
"""

from __future__ import annotations

from netslo.core.units import format_percent

# Probes whose responder stamps receive/send times on the answer (server_time, one-way delays).
SERVER_TIMESTAMPS = frozenset({"udp", "tcp-rr", "tcp-crr", "http", "http-new", "https", "https-new", "ws", "wss"})
# Probes that learn, for a lost request, whether the responder saw it (loss split up/down): the UDP
# responder reports every sequence number it received in its end-of-run answer.
LOSS_SPLIT = frozenset({"udp"})
ONE_WAY = ("owd_up", "owd_down", "ipdv_up", "ipdv_down")


def why_unmeasurable(metric: str, protocol: str, shared_clock: bool) -> str | None:
    """Why ``metric`` cannot be measured for ``protocol`` on a provider (None: it can)."""
    series = metric.split(".")[0]
    if series == "server_time" or series in ONE_WAY:
        if protocol not in SERVER_TIMESTAMPS:
            return f"{metric}: the {protocol} probe gets no responder timestamps"
        if series in ONE_WAY and not shared_clock:
            return f"{metric}: one-way delay needs one clock for client and responder (pods on one kernel)"
    if series == "dns" and protocol != "dns":
        return f"{metric}: DNS lookup metrics come from the dns probe only, not {protocol}"
    if series in ("loss_up", "loss_down") and protocol not in LOSS_SPLIT:
        return f"{metric}: the {protocol} probe cannot tell which direction lost a request (only udp can)"
    return None


def missing_reason(metric: str, counts: dict) -> str:
    """Why a measurable metric has no value after a run, from the run's counts."""
    sent, received = counts.get("sent", 0), counts.get("received", 0)
    loss = format_percent((sent - received) / sent) if sent else "?"
    series = metric.split(".")[0]
    if series in ("loss_up", "loss_down"):
        return (f"the responder's end-of-run report of the requests it received did not arrive, so "
                f"{counts.get('lost_unknown_direction', 0)} lost requests have no direction (loss {loss})")
    if sent and not received:
        return f"no answered requests (loss {loss})"
    if series == "server_time" or series in ONE_WAY:
        return f"no answer carried responder timestamps ({received} of {sent} answered, loss {loss})"
    return f"no data ({received} of {sent} answered, loss {loss})"
