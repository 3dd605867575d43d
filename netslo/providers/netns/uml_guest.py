"""Guest side of the user-mode-linux kernel: runs as PID 1's child program inside UML.

    python -m netslo.providers.netns.uml_guest RUN_DIR

RUN_DIR is a host directory mounted read-write (hostfs) at the same path in the guest. The guest
loads the kernel modules it needs (finit_module, no kmod needed), builds a ``NetnsCluster`` with
the options in ``RUN_DIR/config.json`` (the same code as on the host), writes ``ready.json`` and
then serves requests: ``req/<n>.json`` -> ``resp/<n>.json`` (written atomically). Every probe and
every impairment runs here, inside the guest kernel; the channel's latency never enters a
measurement. ``{"op": "shutdown"}`` closes the cluster and powers the guest off.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

MODULES = ("veth", "bridge", "vxlan", "ifb", "sch_netem", "sch_ingress", "cls_u32", "act_mirred",
           "sch_htb", "sch_tbf", "tcp_bbr")
POLL_S = 0.005
IDLE_POLL_S = 0.05
IDLE_AFTER_S = 2.0
LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_POWER_OFF = 0xFEE1DEAD, 672274793, 0x4321FEDC
SYS_FINIT_MODULE = 313  # x86_64


def load_modules(tree: Path, names=MODULES) -> dict:
    """Load modules and their dependencies from ``tree`` (a /lib/modules/<ver> layout)."""
    deps = {}
    for line in (tree / "modules.dep").read_text().splitlines():
        mod, _, rest = line.partition(":")
        deps[Path(mod).name.removesuffix(".ko")] = (mod, rest.split())
    libc = ctypes.CDLL(None, use_errno=True)
    loaded, result = set(), {}

    def load(path: str) -> str:
        name = Path(path).name.removesuffix(".ko")
        if name in loaded:
            return "ok"
        for dep in reversed(deps.get(name, (path, []))[1]):
            load(dep)
        fd = os.open(tree / path, os.O_RDONLY)
        try:
            rc = libc.syscall(SYS_FINIT_MODULE, fd, b"", 0)
            err = ctypes.get_errno() if rc else 0
        finally:
            os.close(fd)
        loaded.add(name)
        return "ok" if rc == 0 or err == 17 else os.strerror(err)  # 17 = EEXIST

    for name in names:
        if name not in deps:
            result[name] = "builtin or absent"
            continue
        result[name] = load(deps[name][0])
    return result


class Guest:
    """The request loop around one NetnsCluster inside the guest kernel."""

    def __init__(self, run_dir: Path):
        self.dir = run_dir
        self.config = json.loads((run_dir / "config.json").read_text())
        self.cluster = None
        self.pods = {}
        self.impairer = None

    def start(self) -> None:
        t0 = time.monotonic()
        mods = load_modules(Path(self.config["modules"]))
        from netslo.impair import capability
        from netslo.impair.netem import NetemController
        from netslo.providers.netns.cluster import NetnsCluster
        self.cluster = NetnsCluster(nodes=self.config["nodes"], datapath=self.config["datapath"],
                                    run_id=self.config["run_id"], fork_responders=True,
                                    ip_family=self.config.get("ip_family", "ipv4"))   # the guest loads no ipv6 module
        self.impairer = NetemController(self.cluster)
        caps = capability.detect().as_dict()
        ready = {"modules": mods, "kernel": platform.release(), "capabilities": caps,
                 "cluster_s": round(time.monotonic() - t0, 3), "pid": os.getpid()}
        _write_json(self.dir / "ready.json", ready)

    # -- ops
    def op_add_pod(self, name, node, host_network=False, annotations=None):
        pod = self.cluster.add_pod(name, node, host_network=host_network, annotations=annotations)
        self.pods[name] = pod
        return {"name": pod.name, "node": pod.node, "ip": pod.ip, "ip6": pod.ip6, "host_network": pod.host_network,
                "annotations": pod.annotations, "host_interface": getattr(pod, "host_interface", None)}

    def op_start_responders(self, pod, protocols):
        return self.cluster.start_responders(self.pods[pod], tuple(protocols))

    def op_responder_faults(self, pod):
        return self.cluster.responder_faults(self.pods[pod])

    def op_exec_in(self, pod, argv, timeout):
        out = self.cluster.exec_in(self.pods[pod], list(argv), timeout)
        return {"stdout": base64.b64encode(out).decode()}

    def op_environment(self):
        return self.cluster.environment()

    def op_impair_apply(self, pod, spec):
        from netslo.impair.spec import parse
        return self.impairer.apply(self.pods[pod], parse(spec, where="impairment"))

    def op_impair_read(self, pod, direction):
        return self.impairer.read(self.pods[pod], direction)

    def op_impair_remove(self, pod, direction):
        self.impairer.remove(self.pods[pod], direction)
        return None

    def op_impair_clear(self):
        self.impairer.clear()
        return None

    def op_netns_of(self, pod):
        return self.cluster.netns_of(self.pods[pod])

    def handle(self, req: dict) -> dict:
        from netslo.core.errors import InfrastructureError, SpecError, Unsupported
        try:
            fn = getattr(self, "op_" + req["op"])
            return {"ok": fn(**req.get("args", {}))}
        except SpecError as e:
            return {"error": "SpecError", "args": [e.field, e.value if _jsonable(e.value) else repr(e.value),
                                                   e.expected, e.where]}
        except Unsupported as e:
            return {"error": "Unsupported", "message": str(e)}
        except InfrastructureError as e:  # evidence (netslo.core.evidence) crosses the channel as its dict
            return {"error": "InfrastructureError", "message": str(e), "evidence": getattr(e, "evidence", None)}
        except Exception as e:  # a bug or an unexpected kernel answer: report it, keep serving
            return {"error": "InfrastructureError",
                    "message": f"guest: {type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}

    def serve(self) -> None:
        req_dir, resp_dir = self.dir / "req", self.dir / "resp"
        last = time.monotonic()
        while True:
            names = sorted((p for p in req_dir.iterdir() if p.suffix == ".json"), key=lambda p: int(p.stem))
            if not names:  # poll fast while busy, slowly when idle (fewer wake-ups of the guest)
                time.sleep(POLL_S if time.monotonic() - last < IDLE_AFTER_S else IDLE_POLL_S)
                continue
            last = time.monotonic()
            for path in names:
                req = json.loads(path.read_text())
                path.unlink()
                if req["op"] == "shutdown":
                    self.cluster.close()
                    _write_json(resp_dir / path.name, {"ok": None})
                    return
                _write_json(resp_dir / path.name, self.handle(req))
                last = time.monotonic()


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def _write_json(path: Path, doc) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)


def power_off() -> None:
    os.sync()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.reboot(LINUX_REBOOT_CMD_POWER_OFF)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    run_dir = Path(argv[0])
    guest = Guest(run_dir)
    try:
        guest.start()
        guest.serve()
    except BaseException:
        try:
            (run_dir / "guest-error.txt").write_text(traceback.format_exc())
        except OSError:
            pass
    finally:
        if guest.cluster is not None:
            guest.cluster.close()
        if os.getpid() == 1 or os.environ.get("NSL_GUEST_POWEROFF") == "1":
            power_off()
    return 0


if __name__ == "__main__":
    sys.exit(main())
