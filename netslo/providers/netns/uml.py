"""The embedded cluster inside a user-mode-linux kernel: real netem where the host kernel has none.

``UmlCluster`` boots ``/usr/bin/linux`` (Debian ``user-mode-linux``, kernel 6.1 with sch_netem)
with the host's root mounted read-only (hostfs), runs ``netslo.providers.netns.uml_guest`` in it, which
builds the very same ``NetnsCluster`` inside the guest, and proxies the Cluster interface to it:

    host                                      guest (UML kernel, 1 vCPU)
    UmlCluster.add_pod / exec_agent / ...  -> RUN_DIR/req/<n>.json  -> NetnsCluster.add_pod / ...
                                           <- RUN_DIR/resp/<n>.json <-  (npz bytes base64)

RUN_DIR = /run/netslo/uml-RID (host) is mounted read-write at the same path in the guest. Probes,
responders and netem all run inside the guest, so the file channel's latency (a few ms) never
enters a measurement. ``environment()['kernel']`` says ``uml 6.1...``.

Lifetime: the UML process is started in its own process group with PR_SET_PDEATHSIG=SIGKILL;
``close()`` (also on Ctrl-C/SIGTERM through the fixtures, and atexit) asks the guest to power off
and then kills the whole process group by its id. After a kill -9 of the owner, ``reap()`` (called
at every UmlCluster start and by ``python -m netslo reap`` through the netns reaper) kills
the leftover group named in ``RUN_DIR/uml.pid`` and removes RUN_DIR.
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from netslo.core.errors import InfrastructureError, SpecError, Unsupported
from netslo.core.phase_times import timed_call
from netslo.core.procs import LIVE_RUNS, owned_elsewhere_or_here
from netslo.core.resources import IMPORT_ROOT
from netslo.impair import capability
from netslo.providers.base import Cluster, Pod
from netslo.providers.netns import xstate_pad

STATE_ROOT = Path("/run/netslo")
DIR_RE = re.compile(r"^uml-([0-9a-f]{6})$")
HIDDEN_BY_INIT = (Path("/run"), Path("/tmp"))   # the tmpfs mounts of INIT_SH
DEFAULT_MEM = "768M"
BOOT_TIMEOUT_S = 90.0
PR_SET_PDEATHSIG = 1
CHANNEL_POLL_S = 0.002
RT_PRIORITY = 10

INIT_SH = """#!/bin/sh
# netslo user-mode-linux init (generated): mounts, then the guest server as the only program.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mkdir -p {run_dir} /run/netns
mount -t hostfs none {run_dir} -o {run_dir}
{mounts}cd /
export PYTHONPATH={import_root} PYTHONDONTWRITEBYTECODE=1 HOME=/tmp NETSLO_UML_GUEST=1
exec {python} -m netslo.providers.netns.uml_guest {run_dir} >>{run_dir}/guest.log 2>&1
"""


def _remounts() -> str:
    """INIT_SH lines that mount again, from the host, what the guest's tmpfs /run and /tmp hid and
    the guest's interpreter needs: the environment (a venv) and netslo's import root when they live
    there (a CI clone under /tmp, a venv made in /tmp)."""
    need = []
    for p in sorted({Path(sys.prefix).resolve(), IMPORT_ROOT.resolve()}, key=lambda p: len(p.parts)):
        if any(p.is_relative_to(h) for h in HIDDEN_BY_INIT) and not any(p.is_relative_to(n) for n in need):
            need.append(p)
    return "".join(f"mkdir -p {p} 2>/dev/null\nmount -t hostfs none {p} -o {p}\n" for p in need)


# ---- process helpers -----------------------------------------------------------------------------


def _group_members(pgid: int, marker: str) -> list[int]:
    """PIDs in process group ``pgid`` whose command line mentions ``marker`` (our run dir/umid)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[2]) != pgid:
                continue
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if marker in cmd:
            found.append(int(entry))
    return found


def _kill_group(pgid: int, marker: str, grace: float = 2.0) -> list[int]:
    """SIGKILL every process of our UML group (also stopped/traced ones); returns their PIDs."""
    pids = _group_members(pgid, marker)
    if not pids:
        return []
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_members(pgid, marker):
        time.sleep(0.02)
    return pids


def reap(dry_run: bool = False, keep_run: str | None = None) -> list[str]:
    """Kill UML instances and remove run dirs of netslo runs whose owner process is gone."""
    said = []
    if not STATE_ROOT.is_dir():
        return said
    for d in sorted(STATE_ROOT.iterdir()):
        m = DIR_RE.match(d.name)
        if not m or m.group(1) == keep_run:
            continue
        try:
            owner = int((d / "owner.pid").read_text().strip())
        except (OSError, ValueError):
            owner = None
        if owned_elsewhere_or_here(f"uml-{m.group(1)}", owner):
            continue
        try:
            pgid = int((d / "uml.pid").read_text().strip())
        except (OSError, ValueError):
            pgid = None
        if pgid is not None:
            members = _group_members(pgid, str(d))
            if members:
                said.append(f"reap: uml run {m.group(1)}: processes {members}")
                if not dry_run:
                    _kill_group(pgid, str(d))
        said.append(f"reap: uml run {m.group(1)}: run dir {d}")
        if not dry_run:
            shutil.rmtree(d, ignore_errors=True)
    return said


def _pdeathsig() -> None:
    """In the child before exec: die with the parent (covers kill -9 of the owner) and, unless
    NETSLO_UML_RT=0, run at SCHED_FIFO priority so that guest timers (netem's hrtimer) fire on time
    on a busy host. The guest is idle between packets; RT throttling (95 %/s) bounds the rest."""
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass
    cpu = os.environ.get("NETSLO_UML_CPU", str(max(os.cpu_count() or 1, 1) - 1))
    if cpu != "none":
        try:
            os.sched_setaffinity(0, {int(cpu)})
        except (OSError, ValueError):
            pass
    if os.environ.get("NETSLO_UML_RT", "1") != "0":
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))
        except OSError:
            pass


# ---- the cluster ---------------------------------------------------------------------------------

class UmlImpairer:
    """Same interface as ``netem.NetemController``; every call runs inside the guest."""

    def __init__(self, cluster: "UmlCluster"):
        self.cluster = cluster

    def apply(self, pod: Pod, imp) -> dict:
        return self.cluster.call("impair_apply", pod=pod.name, spec=imp.to_doc())

    def read(self, pod: Pod, direction: str) -> dict:
        return self.cluster.call("impair_read", pod=pod.name, direction=direction)

    def remove(self, pod: Pod, direction: str) -> None:
        self.cluster.call("impair_remove", pod=pod.name, direction=direction)

    def clear(self) -> None:
        self.cluster.call("impair_clear")


def kernel_command(init: Path, umid: str, uml_dir: Path, mem: str, preload: Path | None,
                   quiet: bool = True) -> tuple[list[str], dict]:
    """(argv, environment) that boot the UML kernel on the host's root (hostfs, read-only) with
    ``init``, its console on stdout; ``preload`` (the XSAVE-size shim) goes into LD_PRELOAD."""
    argv = [str(capability.UML_BINARY), f"mem={mem}", "rootfstype=hostfs", "rootflags=/", "ro",
            f"init={init}", "con=null", "con0=null,fd:1", "ssl=null", f"umid={umid}", f"uml_dir={uml_dir}"]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR": "/dev/shm"}
    if preload is not None:
        env["LD_PRELOAD"] = str(preload)
    return argv + (["quiet"] if quiet else []), env


class UmlCluster(Cluster):
    """A NetnsCluster running inside a user-mode-linux guest kernel (real sch_netem)."""

    provider = "netns"
    emulated = True
    shared_clock = True

    def __init__(self, nodes: int = 2, datapath: str = "bridge", run_id: str | None = None,
                 mem: str = DEFAULT_MEM):
        ok, why = capability.uml_available()
        if not ok:
            raise Unsupported(why)
        self.run_id = run_id or secrets.token_hex(3)
        self.datapath = datapath
        self.node_count = nodes
        self.dir = STATE_ROOT / f"uml-{self.run_id}"
        self._proc: subprocess.Popen | None = None
        self._seq = 0
        self._pods: dict[str, Pod] = {}
        self._closed = False
        LIVE_RUNS.add(f"uml-{self.run_id}")
        self.reaped = reap(keep_run=self.run_id)
        self.boot_seconds = None
        self.shim_missing = ""
        self.ready: dict = {}
        self.impairer = UmlImpairer(self)
        atexit.register(self.close)
        try:
            self._boot(mem)
        except BaseException:
            self.close()
            raise

    # -- boot
    @timed_call("user-mode-linux boot")
    def _boot(self, mem: str) -> None:
        d = self.dir
        (d / "req").mkdir(parents=True, exist_ok=True)
        (d / "resp").mkdir(exist_ok=True)
        (d / "owner.pid").write_text(str(os.getpid()))
        mods = capability.uml_modules_dir()
        (d / "config.json").write_text(json.dumps({"nodes": self.node_count, "datapath": self.datapath,
                                                   "run_id": self.run_id, "modules": str(mods)}))
        init = d / "init.sh"
        init.write_text(INIT_SH.format(run_dir=d, mounts=_remounts(), import_root=IMPORT_ROOT, python=sys.executable))
        init.chmod(0o755)
        shim, self.shim_missing = xstate_pad.library()
        argv, env = kernel_command(init, f"nsl-{self.run_id}", d, mem, shim)
        console = open(d / "console.log", "wb")
        t0 = time.monotonic()
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
                                      start_new_session=True, preexec_fn=_pdeathsig, cwd=str(d),
                                      env=env)
        console.close()
        (d / "uml.pid").write_text(str(self._proc.pid))
        deadline = t0 + BOOT_TIMEOUT_S
        while not (d / "ready.json").exists():
            if self._proc.poll() is not None or (d / "guest-error.txt").exists():
                raise InfrastructureError(f"user-mode-linux did not come up: {self._tail()}")
            if time.monotonic() > deadline:
                raise InfrastructureError(f"user-mode-linux not ready after {BOOT_TIMEOUT_S:.0f} s: {self._tail()}")
            time.sleep(0.01)
        self.boot_seconds = time.monotonic() - t0
        self.ready = json.loads((d / "ready.json").read_text())

    def _tail(self) -> str:
        parts = []
        for name in ("guest-error.txt", "guest.log", "console.log"):
            try:
                text = (self.dir / name).read_text(errors="replace").strip()
            except OSError:
                continue
            if text:
                parts.append(f"{name}: " + " | ".join(text.splitlines()[-6:]))
        text = "; ".join(parts) or "no output"
        if "ptrace set fp regs failed" in text and self.shim_missing:
            text += f" (this host's XSAVE area is larger than this UML kernel's; {self.shim_missing})"
        return text

    def alive(self) -> bool:
        """The guest kernel is running and not closed."""
        return not self._closed and self._proc is not None and self._proc.poll() is None

    def ended(self) -> str:
        """Why a guest that is not ``alive()`` ended: closed, or its kernel's exit code and log tail."""
        if self._closed:
            return "the guest was closed"
        if self._proc is None:
            return "the guest's kernel was never started"
        code = self._proc.poll()
        return "the guest is running" if code is None else f"the guest's kernel exited (code {code}): {self._tail()}"

    # -- the channel
    def call(self, op: str, _timeout: float = 120.0, **args):
        """Run one operation in the guest; raises what the guest raised (same error classes)."""
        if self._closed or self._proc is None:
            raise InfrastructureError(f"user-mode-linux cluster {self.run_id} is closed")
        self._seq += 1
        name = f"{self._seq}.json"
        tmp = self.dir / "req" / f"{self._seq}.tmp"
        tmp.write_text(json.dumps({"op": op, "args": args}))
        os.replace(tmp, self.dir / "req" / name)
        resp = self.dir / "resp" / name
        deadline = time.monotonic() + _timeout
        while not resp.exists():
            if self._proc.poll() is not None:
                raise InfrastructureError(f"user-mode-linux exited (code {self._proc.returncode}) during {op}: "
                                          f"{self._tail()}")
            if time.monotonic() > deadline:
                raise InfrastructureError(f"user-mode-linux guest did not answer {op} within {_timeout:.0f} s")
            time.sleep(CHANNEL_POLL_S)
        doc = json.loads(resp.read_text())
        resp.unlink()
        if "error" not in doc:
            return doc["ok"]
        if doc["error"] == "SpecError":
            raise SpecError(*doc["args"])
        if doc["error"] == "Unsupported":
            raise Unsupported(doc["message"])
        err = InfrastructureError(doc["message"])
        if doc.get("evidence"):
            err.evidence = doc["evidence"]
        raise err

    # -- Cluster interface
    @property
    def nodes(self) -> list[str]:
        return [f"node{i}" for i in range(self.node_count)]

    @timed_call("pods")
    def add_pod(self, name: str, node: str, *, host_network: bool = False,
                annotations: dict | None = None, responders=None, cpu: str | None = None) -> Pod:
        d = self.call("add_pod", name=name, node=node, host_network=host_network, annotations=annotations or {})
        pod = Pod(d["name"], d["node"], d["ip"], d["host_network"], d["annotations"], d.get("ip6", ""))
        if d.get("host_interface"):
            pod.host_interface = d["host_interface"]
        self._pods[name] = pod
        return pod

    @timed_call("responders")
    def start_responders(self, pod: Pod, protocols=("udp", "tcp", "http")) -> dict[str, int]:
        return self.call("start_responders", pod=pod.name, protocols=list(protocols))

    def responder_faults(self, pod: Pod) -> list[str]:
        return self.call("responder_faults", pod=pod.name)

    def exec_agent(self, pod: Pod, args: list[str], timeout: float) -> bytes:
        return self.exec_in(pod, ["__agent__", *args], timeout)

    @timed_call("bulk flows and pod commands")
    def exec_in(self, pod: Pod, argv: list[str], timeout: float = 60.0) -> bytes:
        """Run a command in the pod's namespace inside the guest ('__agent__' = the netslo agent)."""
        out = self.call("exec_in", _timeout=timeout + 30.0, pod=pod.name, argv=list(argv), timeout=timeout)
        return base64.b64decode(out["stdout"])

    def netns_of(self, pod: Pod) -> str:
        """The pod's namespace name inside the guest (not visible on the host)."""
        return self.call("netns_of", pod=pod.name)

    def environment(self) -> dict[str, str]:
        env = dict(self.call("environment"))
        import platform
        env["kernel"] = f"uml {self.ready.get('kernel', '?')}"
        env["kernel_note"] = (f"user-mode-linux guest on host {platform.release()} (host lacks sch_netem); "
                              f"1 vCPU, booted in {self.boot_seconds:.2f} s")
        env["provider"] = "netns in user-mode-linux (emulated pod network)"
        env["cpu_pinning"] = "uml (single guest CPU)"
        return env

    @timed_call("teardown")
    def close(self) -> None:
        if self._closed:
            return
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                self.call("shutdown", _timeout=10.0)
            except Exception:
                pass
            try:
                proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                pass
        self._closed = True
        if proc is not None:
            _kill_group(proc.pid, str(self.dir))
            try:
                proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
        LIVE_RUNS.discard(f"uml-{self.run_id}")
        try:
            atexit.unregister(self.close)
        except Exception:
            pass
