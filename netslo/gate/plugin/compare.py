"""``--netslo-compare=SPEC``: is B worse than A? The comparison (``netslo.studies.compare``) inside a
gate session: A is the cluster the session's provider options describe (netns: ``--netslo-datapath``,
``--netslo-nodes``; kind: ``--netslo-cni``, ``--netslo-nodes``; existing: the kubeconfig and context), B
the cluster spec given; both are brought up next to each other, every scenario is measured in
interleaved pairs of blocks and judged by the SLO file's ``compare:`` margins. One test per scenario
(``netslo/gate/test_compare.py``); without the option they are deselected and the summary says so.
compare.json and compare.md go to the results directory."""

from __future__ import annotations

import pytest

from netslo.core.errors import SpecError
from netslo.gate.plugin.deselection import deselect
from netslo.gate.plugin.hooks import GROUP, OPTIONS, RESULTS
from netslo.gate.plugin.report import _allure_on
from netslo.providers import clusterspec
from netslo.report import compare as compare_report
from netslo.studies import compare

SPEC_B = pytest.StashKey[clusterspec.ClusterSpec]()
COMPARED = "compared"      # the parameter of the comparison tests: a compare.SCENARIOS entry


def pytest_addoption(parser):
    parser.getgroup(*GROUP).addoption(
        "--netslo-compare", default=None, metavar="SPEC",
        help="compare the session's cluster (A) with cluster spec B (a YAML file or key=value pairs: "
             "provider netns|kind|existing and its keys, e.g. datapath=bridge,rules=1000), interleaved, by the SLO "
             "file's compare: margins (netslo/gate/test_compare.py)")


@pytest.hookimpl(tryfirst=True)   # before the provider is asked whether it can start
def pytest_configure(config):
    text, provider = config.getoption("--netslo-compare"), config.getoption("--netslo-provider")
    if text is not None and provider not in clusterspec.PROVIDERS:
        err = SpecError("--netslo-compare", text, f"--netslo-provider one of {', '.join(clusterspec.PROVIDERS)}, "
                                                  f"not {provider} (a comparison of minikube clusters is not built)")
        raise pytest.UsageError(f"netslo: {err}")


def side_a(config) -> clusterspec.ClusterSpec:
    """A: the cluster the session's provider options describe, as a cluster spec."""
    opts = config.stash[OPTIONS]
    if opts.provider == "kind":
        doc = {"provider": "kind", "cni": config.getoption("--netslo-cni"), "nodes": opts.nodes}
        if config.getoption("--netslo-encapsulation"):
            doc["encapsulation"] = config.getoption("--netslo-encapsulation")
        return clusterspec.parse(doc, "--netslo-cni/--netslo-nodes")
    if opts.provider == "existing":
        doc = {"provider": "existing", "kubeconfig": config.getoption("--netslo-kubeconfig") or "",
               "context": config.getoption("--netslo-context") or ""}
        return clusterspec.parse(doc, "--netslo-kubeconfig/--netslo-context")
    return clusterspec.parse({"datapath": opts.datapath, "nodes": opts.nodes}, "--netslo-datapath/--netslo-nodes")


def pytest_collection_modifyitems(session, config, items):
    """Without --netslo-compare the comparison tests are deselected; with it, B's spec and the SLO
    file's margins are checked here (one line, before anything is brought up), and scenarios a
    ``gate: selected-only`` file leaves out are deselected as not gated."""
    ours = [i for i in items if COMPARED in getattr(getattr(i, "callspec", None), "params", {})]
    text = config.getoption("--netslo-compare")
    if text is None or OPTIONS not in config.stash:
        deselect(config, items, ours, "comparison tests deselected (run them with --netslo-compare=SPEC)")
        return
    opts = config.stash[OPTIONS]
    try:
        config.stash[SPEC_B] = b = clusterspec.load(text, "--netslo-compare")
        clusterspec.check_pair(side_a(config), b, "--netslo-compare", text)
        _, not_gated = compare.gated(opts.slo, compare.SCENARIOS, b.datapath)
    except SpecError as e:
        raise pytest.UsageError(f"netslo: {e}") from None
    deselect(config, items, [i for i in ours if i.callspec.params[COMPARED].id in not_gated],
             f"comparisons not gated: no objective's compare: of {opts.slo.source} selects them")


@pytest.fixture(scope="session")
def netslo_comparison(pytestconfig):
    """The comparison of A and B (``compare.Comparison``), run once for the session; its report is
    written to the results directory. Both clusters are down again before the first test reads it."""
    opts = pytestconfig.stash[OPTIONS]   # (the scenarios the file does not gate, compare leaves out itself)
    result = compare.run(side_a(pytestconfig), pytestconfig.stash[SPEC_B], opts.slo)
    compare_report.write(result, opts.results_dir)
    writer = pytestconfig.stash.get(RESULTS, None)
    if writer is not None:   # results.json "compare"; summary.md: the table
        writer.sections["compare"] = compare_report.to_json(result)
        writer.summary_parts.append(compare_report.markdown(result))
    return result


def attach(config, result, sc) -> None:
    """Allure (when on): the scenario's ECDF plot of A and B and its checks, on the test that judges it."""
    if not _allure_on(config):
        return
    import allure
    path = config.stash[OPTIONS].results_dir / compare_report.plot_name(sc)
    if path.exists():
        allure.attach.file(str(path), name=f"A and B: {sc.scenario.id}", attachment_type=allure.attachment_type.PNG)
    allure.attach("\n".join(compare_report.scenario_lines(sc)), name="B relative to A",
                  attachment_type=allure.attachment_type.TEXT)
