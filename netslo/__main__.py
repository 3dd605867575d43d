"""``python -m netslo``: engine commands that need no pytest.

    python -m netslo slo-schema            print the JSON Schema of SLO files
    python -m netslo validate FILE         validate an SLO file (exit 2 + one line when invalid)
    python -m netslo reap [--dry-run]      remove what killed runs left behind
"""

from __future__ import annotations

import argparse
import sys

from . import slo
from .errors import SpecError


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m netslo")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("slo-schema", help="print the SLO file JSON Schema")
    v = sub.add_parser("validate", help="validate an SLO file")
    v.add_argument("file")
    r = sub.add_parser("reap", help="remove namespaces/processes of dead runs")
    r.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    try:
        if args.cmd == "slo-schema":
            print(slo.schema_json())
        elif args.cmd == "validate":
            spec = slo.load(args.file)
            for line in slo.sample_warnings(spec):
                print(f"warning: {line}", file=sys.stderr)
            print(f"{args.file}: ok ({len(spec.objectives)} objectives)")
        else:
            from .providers import netns
            lines = netns.reap(dry_run=args.dry_run)
            print("\n".join(lines) if lines else "reap: nothing to remove")
    except SpecError as e:
        print(f"netslo: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
