"""What the change-study gate modules (test_policy, test_service_programming) share: their thresholds
and their report (``netslo_study_report``: studies.json in the results directory, and a section of the
terminal summary, so a CI log shows each study's numbers without -s)."""

from __future__ import annotations

import pytest

from netslo.core import progress
from netslo.core.errors import SpecError, Unsupported
from netslo.gate.plugin.deselection import deselect, param_of
from netslo.gate.plugin.gate import skip, skip_unsupported
from netslo.gate.plugin.hooks import OPTIONS, write_result_file
from netslo.slo.runner import not_gated

LINES = pytest.StashKey[dict]()


@pytest.fixture(scope="session")
def netslo_study_report(pytestconfig):
    """record(test name, lines, data): each study's summary lines (printed now and in the terminal
    summary) and its numbers, saved as studies.json in the results directory after the session."""
    lines: dict = pytestconfig.stash.setdefault(LINES, {})
    data: dict = {}

    def record(name: str, text_lines: list, numbers: dict) -> str:
        for line in text_lines:
            progress.note(line)
        lines[name], data[name] = list(text_lines), {"lines": list(text_lines), **numbers}
        return "\n".join(text_lines)

    yield record
    if data:
        write_result_file(pytestconfig, "studies.json", data)


def pytest_collection_modifyitems(session, config, items):
    """On a real cluster the tests marked ``scale`` run only with ``--netslo-scale`` (they make and
    remove thousands of API objects and wait for the CNI to program them: minutes), those marked
    ``rollout`` only with ``--netslo-disruption`` (they restart cluster components); otherwise they
    are deselected and the terminal summary names them. On the embedded provider those marked
    ``cluster_only`` (a real cluster's component with no emulated equivalent) are deselected, and the
    same-node placement of the ``rollout`` ones unless ``--netslo-disruption`` is given (the emulated
    restart and roll reprogram a node's routes to the other nodes, which a same-node path does not
    take: 25 s of the default gate for a study that must see nothing)."""
    if OPTIONS not in config.stash:
        return
    if config.stash[OPTIONS].provider == "netns":
        deselect(config, items, [i for i in items if i.get_closest_marker("cluster_only") is not None],
                 "real-cluster-only studies deselected on the embedded provider (it has no such component)")
        if not config.getoption("--netslo-disruption"):
            deselect(config, items, [i for i in items if i.get_closest_marker("rollout") is not None
                                     and param_of(i, "placement") == "same-node"],
                     "same-node emulated restarts and rolls deselected on the embedded provider (run them with "
                     "--netslo-disruption: the emulated actions reprogram routes to other nodes only)")
        return
    provider = config.stash[OPTIONS].provider
    if not config.getoption("--netslo-scale"):
        deselect(config, items, [i for i in items if i.get_closest_marker("scale") is not None],
                 f"at-scale studies deselected on provider {provider} (run them with --netslo-scale: they make "
                 f"up to 1000 NetworkPolicy objects and wait for the CNI to program each change)")
    if not config.getoption("--netslo-disruption"):
        deselect(config, items, [i for i in items if i.get_closest_marker("rollout") is not None],
                 f"rollout studies deselected on provider {provider} (run them with --netslo-disruption: they "
                 f"restart the CNI agent, roll its DaemonSet or restart kube-proxy, 5 times per placement)")


def pytest_terminal_summary(terminalreporter, config):
    lines = config.stash.get(LINES, {})
    if lines:
        terminalreporter.section("netslo change studies")
        for name, text in lines.items():
            terminalreporter.write_line(name)
            for line in text:
                terminalreporter.write_line(f"  {line}")


def study_thresholds(slo, cluster, labels: dict, wanted: str) -> list:
    """The thresholds of a change study. None on the embedded provider: a SpecError (a study nobody
    set an objective for must not pass silently); none on a real cluster: a 'provider' skip naming the
    datapath (the shipped SLO file gates NetworkPolicy on the CNIs that enforce it, Calico, Cilium and
    Antrea, and Services on every cluster: a user's file decides for its own datapath)."""
    found = slo.thresholds_for({**labels, "datapath": cluster.datapath})
    if found:
        return found
    try:
        not_gated(slo, f"study {labels['study']}", cluster.datapath)
    except Unsupported as e:
        skip_unsupported(e)
    if cluster.emulated:
        raise SpecError(f"{slo.source}: objectives", labels["study"], f"an objective with {wanted} thresholds"
                        + slo.not_selected_hint())
    skip("provider", f"no objective with {wanted} thresholds selects datapath {cluster.datapath} in {slo.source}")
