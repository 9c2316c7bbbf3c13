"""Verdicts on a release's declared claim: the tests of a published release's residuals against
its declared noise, and the decision rule that turns them into one word per level.

* :mod:`auditlib.claims.laws` — :class:`NoiseLaw`, a query's declared noise (moments, cdf, the
  path of its variance parameter).
* :mod:`auditlib.claims.residual_tests` — the scale test and the fit test, and the small sums a
  level's residuals are reduced to for them (:class:`LawMoments`, :class:`FitCounts`).
* :mod:`auditlib.claims.tradeoff_test` — the trade-off test: certified f-DP points of the
  residuals against the declared noise's curve (no noise family assumed).
* :mod:`auditlib.claims.level` — :func:`judge_residuals`, a level's verdict from residuals in
  memory.
* :mod:`auditlib.claims.verdict` — :class:`Verdict`, the decision rule (:data:`RULE`), the ε
  interval through the certified accountant, and the verdicts of simulated releases (consistent
  by construction).

The rule and its error rates are derived in ``docs/epl.md`` (section "The claim verdict").
"""

from auditlib.claims.laws import NoiseLaw
from auditlib.claims.level import judge_residuals
from auditlib.claims.residual_tests import (
    FIT_BINS,
    FitCounts,
    FitTest,
    LawMoments,
    ScaleTest,
    fit_test,
    fitted_factor,
    scale_test,
    transform,
)
from auditlib.claims.tradeoff_test import TradeoffTest, tradeoff_test
from auditlib.claims.verdict import (
    ASSUMPTIONS,
    RESOLVE_RATIO,
    RULE,
    TESTS_PER_LEVEL,
    VERDICTS,
    Verdict,
    by_construction,
    declared_epsilon,
    epsilon_interval,
    judge_published,
    not_published,
)

__all__ = [
    "ASSUMPTIONS",
    "FIT_BINS",
    "RESOLVE_RATIO",
    "RULE",
    "TESTS_PER_LEVEL",
    "VERDICTS",
    "FitCounts",
    "FitTest",
    "LawMoments",
    "NoiseLaw",
    "ScaleTest",
    "TradeoffTest",
    "Verdict",
    "by_construction",
    "declared_epsilon",
    "epsilon_interval",
    "fit_test",
    "fitted_factor",
    "judge_published",
    "judge_residuals",
    "not_published",
    "scale_test",
    "tradeoff_test",
    "transform",
]
