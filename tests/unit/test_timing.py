"""Schedule starts: a phase puts the first send on a multiple of the interval plus the phase."""

import pytest

from netslo.timing import START_LEAD_NS, now_ns, schedule_start


@pytest.mark.parametrize("interval_ns,phase_ns", [(10_000_000, 0), (10_000_000, 5_000_000), (1_000_000_000, 999_999_999),
                                                  (2_000_000, None)])
def test_schedule_start_lands_on_its_phase(interval_ns, phase_ns):
    before = now_ns()
    start = schedule_start(interval_ns, phase_ns)
    after = now_ns()
    assert start >= before + START_LEAD_NS
    if phase_ns is None:
        assert start <= after + START_LEAD_NS
    else:
        assert start % interval_ns == phase_ns and start < after + START_LEAD_NS + interval_ns
