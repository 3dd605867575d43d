"""Evidence for an infrastructure error: the kernel state a person would look at when a connection
between two pods of the embedded pod network times out or is refused.

For each network namespace on the path (client pod, client node, server node, server pod):
``tc -s qdisc`` (the path's devices and their counters), ``iptables-save -c`` (rules with packet and
byte counters), ``ip -br link`` (state and MAC of the path's devices, to compare with the neighbour
entries), ``ip neigh`` and ``ip route``; for the client pod also ``ss -tin`` (state of its TCP
flows: retransmits, rtt, cwnd), for the server pod ``ss -tuan`` (its listeners and every socket's
state: a refused connection shows whether the port had a listener). Every command has a short timeout and the whole collection a time
budget, so a wedged namespace cannot hang the error path.

``attach(err, sections)`` returns the error with an indented ``evidence:`` block appended to its
message (each section cut to ``MESSAGE_LINES`` lines) and the sections as a dict on
``err.evidence`` (each cut to ``SECTION_LINES`` lines), which ``netslo.report.allure.attach_evidence``
attaches one by one.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from netslo.core.errors import InfrastructureError

NETNS_DIR = "/run/netns"
COMMAND_TIMEOUT_S = 3.0   # per command
BUDGET_S = 20.0           # whole collection
SECTION_LINES = 200       # per section in err.evidence (Allure attachment)
MESSAGE_LINES = 20        # per section in the error message

POD_COMMANDS = (("tc -s qdisc", ["tc", "-s", "qdisc", "show"]),
                ("iptables-save -c", ["iptables-save", "-c"]),
                ("ip -br link", ["ip", "-br", "link", "show"]),
                ("ip neigh", ["ip", "neigh", "show"]),
                ("ip route", ["ip", "route", "show"]))
FLOW_COMMAND = ("ss -tin", ["ss", "-tin"])
SERVER_COMMAND = ("ss -tuan", ["ss", "-tuan"])
SERVER_ROLE = "server pod"


@dataclass(frozen=True)
class Place:
    """One network namespace on the path: its role ('client pod', 'server node', ...), the pod or
    node name, the namespace, and the devices on the path there (None: all of them)."""

    role: str
    name: str
    netns: str
    devices: tuple[str, ...] | None = None

    @property
    def label(self) -> str:
        return f"{self.role} {self.name} ({self.netns})"


def run_in(netns: str, argv: list[str], timeout: float = COMMAND_TIMEOUT_S) -> str:
    """stdout (and stderr, if any) of ``argv`` in namespace ``netns``; a failure is described, not raised."""
    try:
        run = subprocess.run(["nsenter", f"--net={NETNS_DIR}/{netns}", *argv], capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"(no answer within {timeout:g} s)"
    except OSError as e:
        return f"(could not run {argv[0]}: {e.strerror or e})"
    out = run.stdout.rstrip()
    if run.returncode:
        out += f"\n(exit {run.returncode}: {run.stderr.strip()})"
    return out.strip() or "(empty)"


def on_path(device: str | None, devices: tuple[str, ...] | None) -> bool:
    """Whether ``device`` is one of ``devices`` (None: any device but the loopback)."""
    return device in devices if devices is not None else device != "lo"


def qdisc_blocks(text: str, devices: tuple[str, ...] | None) -> str:
    """``tc -s qdisc show`` output reduced to the qdiscs of ``devices`` (None: every device but the
    loopback); each qdisc is its line and the indented counter lines under it."""
    if not text.startswith("qdisc"):
        return text
    kept, keep = [], False
    for line in text.splitlines():
        if line.startswith("qdisc "):
            words = line.split()
            dev = words[words.index("dev") + 1] if "dev" in words[:-1] else None
            keep = on_path(dev, devices)
        if keep:
            kept.append(line)
    return "\n".join(kept) or f"(no qdisc on {', '.join(devices or ('any device',))})"


def link_lines(text: str, devices: tuple[str, ...] | None) -> str:
    """``ip -br link`` output reduced to ``devices`` (None: every device but the loopback)."""
    kept = [ln for ln in text.splitlines() if ln.strip() and on_path(ln.split()[0].split("@")[0], devices)]
    return "\n".join(kept) or text


def _flows(text: str) -> str:
    """``ss -tin`` output; a header alone says so (the client process had closed its sockets)."""
    return text if len(text.splitlines()) > 1 else "(no open TCP flow in this namespace)"


def cut(text: str, lines: int) -> str:
    """The first ``lines`` lines of ``text`` and how many were left out."""
    rows = text.splitlines()
    if len(rows) <= lines:
        return text
    return "\n".join(rows[:lines] + [f"... ({len(rows) - lines} more lines)"])


def _iptables(text: str) -> str:
    """iptables-save output without its comment lines."""
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith("#")) or "(no rules)"


def collect(places: list[Place], flow: Place | None = None, budget_s: float = BUDGET_S) -> dict[str, str]:
    """Section name -> text, in path order; ``ss -tin`` of ``flow`` first (it changes fastest), then
    the sockets of the server pod (``SERVER_ROLE``), then each place's commands."""
    deadline = time.monotonic() + budget_s
    jobs = [(flow, *FLOW_COMMAND)] if flow is not None else []
    jobs += [(p, *SERVER_COMMAND) for p in places if p.role == SERVER_ROLE]
    jobs += [(p, title, argv) for p in places for title, argv in POD_COMMANDS]
    sections = {}
    for place, title, argv in jobs:
        left = deadline - time.monotonic()
        if left <= 0:
            text = f"(not collected: the evidence budget of {budget_s:g} s was spent)"
        else:
            text = run_in(place.netns, argv, min(COMMAND_TIMEOUT_S, left))
            if title == "tc -s qdisc":
                text = qdisc_blocks(text, place.devices)
            elif title == "iptables-save -c":
                text = _iptables(text)
            elif title == "ip -br link":
                text = link_lines(text, place.devices)
            elif title == "ss -tin":
                text = _flows(text)
        sections[f"{title}: {place.label}"] = cut(text, SECTION_LINES)
    return sections


def block(sections: dict[str, str], lines: int = MESSAGE_LINES) -> str:
    """The indented ``evidence:`` block of an error message (each section cut to ``lines``)."""
    out = [f"evidence (each section cut to {lines} lines; full sections on the exception's .evidence):"]
    for name, text in sections.items():
        out.append(f"  {name}:")
        out += ["    " + ln for ln in cut(text, lines).splitlines()]
    return "\n".join(out)


def attach(err: InfrastructureError, sections: dict[str, str]) -> InfrastructureError:
    """``err`` with the evidence block appended to its message and ``.evidence = sections``."""
    if not sections:
        return err
    out = type(err)(f"{err}\n{block(sections)}")
    out.evidence = sections
    return out


def of(exc: BaseException | None) -> dict[str, str]:
    """The evidence sections carried by ``exc`` or by an exception it was raised from ({} if none)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        found = getattr(exc, "evidence", None)
        if found:
            return dict(found)
        exc = exc.__cause__ or exc.__context__
    return {}
