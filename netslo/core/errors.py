"""The three kinds of outcome that are not a pass, plus bad input.

- ``SpecError``: bad user input (SLO file, CLI option); one line naming file, field, value, expected form.
- ``InfrastructureError``: the cluster, a pod, a responder or an impairment did not work; a test
  reports it as an *error* with its cause, never as an SLO failure.
- ``Unsupported``: the platform lacks a capability the scenario needs, known before measuring; the
  test is skipped with the reason and a skip category (``netslo.slo.skips``). Data that went missing
  during a measurement (lost requests) is never Unsupported: it is a finding.
"""


class NetsloError(Exception):
    """Base class of every error netslo raises on purpose."""


class SpecError(NetsloError, ValueError):
    """Invalid input. ``str()`` is one line: '<where>: <field>: value <v!r> — expected <form>'."""

    def __init__(self, field: str, value, expected: str, where: str = ""):
        self.field, self.value, self.expected, self.where = field, value, expected, where
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}{field}: value {value!r} — expected {expected}")

    def located(self, where: str) -> "SpecError":
        """The same error, prefixed with a file name or context."""
        return SpecError(self.field, self.value, self.expected, where)


class InfrastructureError(NetsloError, RuntimeError):
    """Something under the measurement failed (cluster, pod, agent, impairment)."""


class Unsupported(NetsloError):
    """A capability the scenario needs is missing here; carries the reason and skip category."""

    def __init__(self, message: str, category: str = "capability"):
        super().__init__(message)
        self.category = category


class NotEnoughSamples(NetsloError):
    """A check could not be bounded: too few answered samples for its confidence interval. The test
    errors (never passes on a point estimate); the message names n and the n it needs."""
