"""``skip_unsupported`` skips only for a capability the run lacks; anything else errors with its cause
(before: an InfrastructureError, e.g. no CAP_NET_ADMIN for the DSCP matrix, ended in AttributeError)."""

import pytest

from netslo.core.errors import InfrastructureError, Unsupported
from netslo.gate.plugin.gate import skip_unsupported


def test_unsupported_skips_with_its_category_or_the_given_one():
    with pytest.raises(pytest.skip.Exception, match=r"\[capability\].*no sch_fq"):
        skip_unsupported(Unsupported("no sch_fq", category="capability"))
    with pytest.raises(pytest.skip.Exception, match=r"\[provider\].*no sch_fq"):
        skip_unsupported(Unsupported("no sch_fq", category="capability"), "provider")


@pytest.mark.parametrize("exc", [InfrastructureError("the netns provider needs CAP_NET_ADMIN"), OSError(1, "EPERM")])
def test_anything_else_is_raised_again_not_skipped(exc):
    with pytest.raises(type(exc)) as got:
        skip_unsupported(exc)
    assert got.value is exc
