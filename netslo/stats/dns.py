"""Counts of a DNS probe's lookups from its per-row fields (``meta['per_row']``, written by
``netslo.traffic.probes.dns``): lookups retried, query sends that expired per type, queries sent, and
the answers' response codes by name (RFC 1035 §4.1.1; RFC 6895 registers the numbers)."""

from __future__ import annotations

import numpy as np

# response code -> name; a code without one here is reported as RCODE<n>
RCODE_NAMES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


def rcode_name(rcode: int) -> str:
    """'NXDOMAIN' for 3; 'RCODE9' for codes without a name here; 'TIMEOUT' for -1 (no answer)."""
    return "TIMEOUT" if rcode < 0 else RCODE_NAMES.get(rcode, f"RCODE{rcode}")


def timeouts(per_row: dict, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(expired A sends, expired AAAA sends) per lookup of ``n``, or None when the rows do not say
    (-1: a row of a part that recorded none; not a timeout)."""
    a = np.asarray(per_row.get("dns_timeouts_a", []), dtype=np.int64)
    aaaa = np.asarray(per_row.get("dns_timeouts_aaaa", []), dtype=np.int64)
    return (a, aaaa) if len(a) == n and len(aaaa) == n else None


def retried(per_row: dict, n: int) -> np.ndarray | None:
    """Mask of the lookups of ``n`` that had a query send expire, or None when the rows do not say."""
    t = timeouts(per_row, n)
    return None if t is None else (t[0] > 0) | (t[1] > 0)


def lookup_counts(per_row: dict, n: int) -> tuple[int | None, dict]:
    """(lookups of ``n`` that had a query send expire, or None when the rows do not say; counts:
    ``dns_retried``, ``dns_timeouts_a``, ``dns_timeouts_aaaa``, ``dns_queries``, ``dns_rcodes``)."""
    counts, n_retried = {}, None
    t = timeouts(per_row, n)
    if t is not None:
        a, aaaa = t
        n_retried = int(np.count_nonzero((a > 0) | (aaaa > 0)))
        counts.update(dns_retried=n_retried, dns_timeouts_a=int(a.clip(0).sum()), dns_timeouts_aaaa=int(aaaa.clip(0).sum()),
                      dns_queries=int(np.clip(per_row.get("dns_queries", [0]), 0, None).sum()))
    rcodes = np.asarray(per_row.get("dns_rcode", []), dtype=np.int64)
    counts["dns_rcodes"] = {rcode_name(int(r)): int(k) for r, k in zip(*np.unique(rcodes, return_counts=True))}
    return n_retried, counts
