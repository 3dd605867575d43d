"""Record or check the sha256 of a pinned CNI release file.

    python -m netslo.providers.cni digest NAME [--file PATH] [--record]

Without ``--file`` the file comes from where an install would take it ($NETSLO_CNI_MIRROR, the cache,
else the release URL: needs a network that reaches it). Prints ``sha256  NAME VERSION SOURCE`` and
whether it matches the data file; ``--record`` writes it into netslo/providers/cni/NAME.yaml when none is
recorded (a recorded digest that differs is never overwritten: exit 1).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

from netslo.providers.cni import CNIS, fetch, load, source


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m netslo.providers.cni")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("digest", help="sha256 of a CNI's pinned release file")
    d.add_argument("name", choices=CNIS)
    d.add_argument("--file", help="a local copy of the release file")
    d.add_argument("--record", action="store_true", help="write it into the data file if none is recorded")
    a = ap.parse_args(argv)
    spec = load(a.name)
    if a.file:
        digest, where = hashlib.sha256(Path(a.file).read_bytes()).hexdigest(), a.file
    else:
        _, digest = fetch(spec, allow_unrecorded=True)
        where = source(spec)
    state = ("matches the recorded digest" if digest == spec.sha256 else
             "not recorded yet" if not spec.sha256 else f"DIFFERS from the recorded {spec.sha256}")
    print(f"{digest}  {spec.name} {spec.version} {where}: {state}")
    if spec.sha256 and digest != spec.sha256:
        return 1
    if a.record and not spec.sha256:
        path = Path(spec.source_file)
        text, n = re.subn(r'^(\s*sha256:\s*)""', rf'\g<1>{digest}', path.read_text(), count=1, flags=re.M)
        if n != 1:
            print(f"{path}: no empty sha256 field to fill", file=sys.stderr)
            return 1
        path.write_text(text)
        print(f"recorded in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
