"""``python -m netslo``: engine commands that need no pytest.

    python -m netslo slo-schema            print the JSON Schema of SLO files
    python -m netslo validate FILE         validate an SLO file (exit 2 + one line when invalid)
    python -m netslo slo suggest RESULTS... [--margin 1.5x] [--extends netslo|none]
                                           an SLO file from the CI upper bounds of your own runs
    python -m netslo compare --a SPEC --b SPEC [--slo FILE] [--results DIR] [--seed N]
                                           is B worse than A? both clusters up, interleaved pairs,
                                           a non-inferiority verdict per compare: margin (exit 1 if not)
    python -m netslo mesh [--nodes N] [--zones Z] [--pools P] [--provider existing --kubeconfig K] [--select L=G,...]
                          [--limit N] [--partners K] [--budget 10m | --requests N] [--slo FILE] [--results DIR]
                                           every node pair in rounds of disjoint pairs, judged per pair
                                           (Holm), per zone/pool and over pairs; a heatmap (exit 1 if not met)
    python -m netslo reap [--dry-run]      remove what killed runs left behind on this machine
    python -m netslo reap --kubeconfig K [--context C] [--max-age 180min] [--dry-run]
                                           ... and their namespaces on that cluster (owner gone)
    python -m netslo reap --kind [--keep-cluster] [--dry-run]
                                           ... and kind clusters whose creating run is gone
    python -m netslo gate [PYTEST ARGS]    the gate: pytest --pyargs netslo.gate -m cni [PYTEST ARGS]
    python -m netslo image context DIR     the agent image's build context, from this installation
    python -m netslo image build [--tag T] docker build of it (tag localhost/netslo-agent:<version>)
    python -m netslo image load --cluster NAME [--tag T]
                                           kind load docker-image into that kind cluster
    python -m netslo --version
"""

from __future__ import annotations

import argparse
import os
import sys

from netslo import __version__
from netslo.core.errors import InfrastructureError, SpecError, Unsupported
from netslo.report.suggest import DEFAULT_MARGIN, margin_of, suggest
from netslo.slo import spec as slo


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["gate"]:       # everything after "gate" belongs to pytest
        return gate(argv[1:])
    p = argparse.ArgumentParser(prog="python -m netslo")
    p.add_argument("--version", action="version", version=f"netslo {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("gate", help="run the gate: pytest --pyargs netslo.gate -m cni [PYTEST ARGS]")
    i = sub.add_parser("image", help="the agent image, from this installation of netslo")
    i.add_argument("action", choices=("context", "build", "load"))
    i.add_argument("directory", nargs="?", help="context: where to write the build context")
    i.add_argument("--tag", default=None, help="image tag (default localhost/netslo-agent:<version>)")
    i.add_argument("--cluster", help="load: name of the kind cluster")
    sub.add_parser("slo-schema", help="print the SLO file JSON Schema")
    v = sub.add_parser("validate", help="validate an SLO file")
    v.add_argument("file")
    s = sub.add_parser("slo", help="SLO files from your own runs")
    ss = s.add_subparsers(dest="slo_cmd", required=True)
    sg = ss.add_parser("suggest", help="print an SLO file whose thresholds are the worst CI upper bounds of "
                                       "the runs given, times a margin")
    sg.add_argument("results", nargs="+", metavar="RESULTS",
                    help="results directories (--netslo-results), results.json files, or directories of past runs")
    sg.add_argument("--margin", default=f"{DEFAULT_MARGIN:g}x", help="factor on each bound, >= 1 (default 1.5x)")
    sg.add_argument("--extends", default=slo.SHIPPED,
                    help="the base the file extends (default netslo: the shipped objectives); none: a file of "
                         "its own that gates only what it selects")
    c = sub.add_parser("compare", help="compare two clusters interleaved: is B worse than A by more than the "
                                       "SLO file's compare: margins?")
    c.add_argument("--a", required=True, metavar="SPEC", help="cluster spec of A (the baseline): a YAML file or "
                                                             "key=value pairs, e.g. datapath=bridge or "
                                                             "provider=kind,cni=calico")
    c.add_argument("--b", required=True, metavar="SPEC", help="cluster spec of B (the candidate), e.g. rules=1000")
    c.add_argument("--slo", default=None, help="SLO file (default: slo.yaml here, else the shipped one)")
    c.add_argument("--results", default="netslo-results", help="where compare.json and compare.md go")
    c.add_argument("--seed", type=int, default=None, help="seed of the random block order (default: from the clock)")
    c.add_argument("--pairs", type=int, default=None, help="pairs of blocks measured first per scenario (default 64)")
    c.add_argument("--max-pairs", type=int, default=None, help="pairs at most, when undecided (default 512)")
    m = sub.add_parser("mesh", help="measure every node pair of a cluster in rounds of disjoint pairs and judge "
                                    "them (per pair with Holm, per zone/pool, over pairs)")
    m.add_argument("--provider", default="netns", choices=("netns", "existing"),
                   help="netns: an embedded cluster of --nodes nodes; existing: the cluster of --kubeconfig")
    m.add_argument("--nodes", default="8", help="netns: nodes (2..64, default 8)")
    m.add_argument("--zones", default="1", help="netns: emulated zones, contiguous blocks of nodes (default 1)")
    m.add_argument("--pools", default="1", help="netns: emulated pools, across the zones (node i in pool i mod pools)")
    m.add_argument("--datapath", default="bridge", help="netns: bridge | routed | vxlan (default bridge)")
    m.add_argument("--kubeconfig", default=None, help="existing: kubeconfig (default $KUBECONFIG)")
    m.add_argument("--context", default=None, help="existing: kubeconfig context")
    m.add_argument("--image", default=None, help="existing: the agent image (default localhost/netslo-agent:<version>)")
    m.add_argument("--select", default=None, metavar="LABEL=GLOB,...", help="only nodes whose labels match")
    m.add_argument("--limit", default=None, help="at most this many of the selected nodes (by name)")
    m.add_argument("--partners", default=None, help="a sampled design: this many partners per node (every zone "
                                                    "and pool pair still covered); default every pair")
    m.add_argument("--budget", default=None, help="time for the probing, e.g. 10m: sets the requests per pair, or "
                                                  "refuses naming the least it needs")
    m.add_argument("--requests", default=None, help="requests per pair (default 600)")
    m.add_argument("--interval", default=None, help="send period per pair, e.g. 5ms (default: the SLO file's interval)")
    m.add_argument("--pool-label", default=None, help="the node label that names a node's pool (default netslo.io/pool)")
    m.add_argument("--seed", default="0", help="seed of a sampled design (default 0)")
    m.add_argument("--slo", default=None, help="SLO file (default: slo.yaml here, else the shipped one)")
    m.add_argument("--results", default="netslo-results", help="where mesh.json, mesh.md and mesh-heatmap.png go")
    r = sub.add_parser("reap", help="remove namespaces/processes of dead runs (here, or on a cluster)")
    r.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")
    r.add_argument("--kubeconfig", help="reap run namespaces on this cluster (default $KUBECONFIG with --context)")
    r.add_argument("--context", help="kubeconfig context of the cluster to reap")
    r.add_argument("--max-age", default="180min",
                   help="a run namespace whose owner cannot be checked from here (another host, no "
                        "owner record) is reaped once this old (default 180min)")
    r.add_argument("--kind", action="store_true", help="also delete kind clusters of dead runs")
    r.add_argument("--keep-cluster", action="store_true", help="with --kind: keep those clusters")
    args = p.parse_args(argv)
    try:
        if args.cmd == "image":
            return _image(p, args)
        if args.cmd == "compare":
            return _compare(args)
        if args.cmd == "mesh":
            return _mesh(args)
        if args.cmd == "slo-schema":
            print(slo.schema_json())
        elif args.cmd == "slo":
            sys.stdout.write(suggest(args.results, margin_of(args.margin),
                                     None if args.extends == "none" else args.extends))
        elif args.cmd == "validate":
            spec = slo.load(args.file)
            for line in slo.sample_warnings(spec):
                print(f"warning: {line}", file=sys.stderr)
            print(f"{args.file}: ok ({len(spec.objectives)} objectives)")
        else:
            lines = _reap(args)
            print("\n".join(lines) if lines else "reap: nothing to remove")
    except (SpecError, FileNotFoundError) as e:
        print(f"netslo: {e}", file=sys.stderr)
        return 2
    except (InfrastructureError, Unsupported) as e:
        print(f"netslo: {e}", file=sys.stderr)
        return 1
    return 0


def gate(pytest_args: list[str]) -> int:
    """``pytest --pyargs netslo.gate -m cni`` with the caller's further pytest arguments, in place of
    this process (exec): pytest then imports netslo itself, so it can rewrite the plugin's asserts
    (in this process netslo is imported already: "PytestAssertRewriteWarning: Module already imported")."""
    argv = [sys.executable, "-m", "pytest", "--pyargs", "netslo.gate", "-m", "cni", *pytest_args]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)


def _image(p: argparse.ArgumentParser, args) -> int:
    from netslo.agent import image
    tag = args.tag or image.DEFAULT_TAG
    if args.action == "context":
        if not args.directory:
            p.error("image context: DIRECTORY: missing, expected the directory to write the build context to")
        print(image.write_context(args.directory))
    elif args.action == "build":
        print(image.build(tag))
    else:
        if not args.cluster:
            p.error("image load: --cluster: missing, expected the name of a kind cluster")
        image.load(args.cluster, tag, kind=os.environ.get("NETSLO_KIND", "kind"))
        print(f"{tag} loaded into kind cluster {args.cluster}")
    return 0


def _compare(args) -> int:
    from pathlib import Path

    from netslo.providers import clusterspec
    from netslo.report import compare as report
    from netslo.studies import compare
    a, b = clusterspec.check_pair(clusterspec.load(args.a, "--a"), clusterspec.load(args.b, "--b"), "--b", args.b)
    spec = slo.load(args.slo or (Path("slo.yaml") if Path("slo.yaml").exists() else slo.shipped_slo("slo.yaml")))
    pairs = args.pairs if args.pairs is not None else compare.PAIRS
    most = args.max_pairs if args.max_pairs is not None else max(compare.MAX_PAIRS, pairs)
    if not 2 <= pairs <= most <= 10_000:
        raise SpecError("--pairs/--max-pairs", f"{pairs}/{most}", "2 <= pairs <= max-pairs <= 10000")
    result = compare.run(a, b, spec, seed=args.seed, pairs=pairs, more_pairs=pairs, max_pairs=most)
    print("\n".join(report.terminal_lines(result)))
    for path in report.write(result, Path(args.results).expanduser()):
        print(f"netslo compare: wrote {path}")
    return 0 if result.verdict == "pass" else 1


def _mesh(args) -> int:
    from pathlib import Path

    from netslo.core.units import duration, whole
    from netslo.providers import NETNS_MAX_NODES, POOL_LABEL, make_provider
    from netslo.report import mesh as report
    from netslo.studies.mesh import measure
    spec = slo.load(args.slo or (Path("slo.yaml") if Path("slo.yaml").exists() else slo.shipped_slo("slo.yaml")))
    if args.budget is not None and args.requests is not None:
        raise SpecError("--budget/--requests", f"{args.budget}/{args.requests}", "one of the two, not both")
    mesh = measure.MeshSpec(
        select=measure.parse_select(args.select, "--select"),
        limit=None if args.limit is None else whole(args.limit, "--limit", 2),
        partners=None if args.partners is None else whole(args.partners, "--partners", 1),
        budget_s=None if args.budget is None else duration(args.budget, "--budget"),
        requests=None if args.requests is None else whole(args.requests, "--requests", 1),
        interval_s=measure.parse_interval(args.interval, "--interval"),
        seed=whole(args.seed, "--seed", 0), pool_label=args.pool_label or POOL_LABEL, option="--")
    if args.provider == "netns":   # IPv4 pods (what a mesh measures), responders forked from the warm agent
        from netslo.providers.netns.cluster import NetnsCluster
        nodes = whole(args.nodes, "--nodes", 2, NETNS_MAX_NODES)
        zones, pools = whole(args.zones, "--zones", 1, nodes), whole(args.pools, "--pools", 1, nodes)

        def up():
            return NetnsCluster(nodes=nodes, datapath=args.datapath, ip_family="ipv4", zones=zones, pools=pools,
                                fork_responders=True)
    else:
        up = make_provider("existing", kubeconfig=args.kubeconfig, context=args.context, image=args.image).up
    with up() as cluster:
        result = measure.run(cluster, mesh, spec)
    print("\n".join(report.terminal_lines(result)))
    for path in report.write(result, Path(args.results).expanduser()):
        print(f"netslo mesh: wrote {path}")
    return 0 if result.verdict == "pass" else 1


def _reap(args) -> list[str]:
    """A cluster's run namespaces (--kubeconfig/--context), kind clusters (--kind), else this
    machine's namespaces, processes and user-mode-linux guests."""
    lines = []
    if args.kubeconfig or args.context:
        from netslo.core.units import duration
        from netslo.providers.kube import reap as kube_reap
        from netslo.providers.kube.api import KubeApi
        max_age = duration(args.max_age, "--max-age")
        lines += kube_reap.reap(KubeApi(args.kubeconfig, args.context), dry_run=args.dry_run,
                                max_age=max_age, wait=True)
    if args.kind:
        from netslo.providers.kube import reap as kube_reap
        lines += kube_reap.reap_kind_clusters(keep_cluster=args.keep_cluster, dry_run=args.dry_run)
    if not (args.kubeconfig or args.context or args.kind):
        from netslo.providers.netns import cluster as netns
        lines += netns.reap(dry_run=args.dry_run)
    return lines


if __name__ == "__main__":
    sys.exit(main())
