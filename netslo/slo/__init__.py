"""Objectives and their verdicts: the SLO file (``spec``), the scenarios it selects (``scenario``), the
runner that measures a scenario until its objectives can be judged (``runner``, ``stalls``,
``measurable``, ``idle_guard``) and the declared skips (``skips``)."""
