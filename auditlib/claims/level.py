"""A level's verdict from its residuals held in memory: the two passes of the tests (moments,
then the fit at the estimated scale), the ε interval and the decision — what the audit flow does
block by block (``flows/audit/claims.py``), for a notebook or a benchmark.

>>> import numpy as np
>>> from auditlib.accounting import GeometricLoss
>>> from auditlib.mechanisms import TwoSidedGeometric
>>> rng = np.random.default_rng(1)
>>> published = TwoSidedGeometric(1.0).rvs(5_000, rng)      # real ε = 1 ...
>>> claim = NoiseLaw("geometric", 2.0)                        # ... declared as ε = 1/2
>>> v = judge_residuals([(claim, published)], [GeometricLoss(0.5, 1)], delta=1e-10,
...                     declared_eps=0.5, threshold=0.05, geolevel="County", rng=rng)
>>> v.verdict
'refuted'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.claims.laws import NoiseLaw
from auditlib.claims.residual_tests import (
    FitCounts,
    LawMoments,
    fit_test,
    fitted_factor,
    scale_test,
)
from auditlib.claims.tradeoff_test import tradeoff_test
from auditlib.claims.verdict import Verdict, epsilon_interval, judge_published
from auditlib.exceptions import InvalidParameterError


def judge_residuals(
    residuals: Sequence[tuple[NoiseLaw, npt.ArrayLike]],
    components: Sequence[Any],
    *,
    delta: float,
    declared_eps: float,
    threshold: float,
    geolevel: str,
    rng: np.random.Generator,
    measured_at: str | None = None,
) -> Verdict:
    """The verdict on one level's claim from ``residuals`` (each query's declared law with its
    residuals), the level's accounting ``components``, the declared ε at ``delta`` and the
    per-test level ``threshold`` (α/m); ``rng`` draws the fit test's randomization, then the
    trade-off test's split of the residuals."""
    if not 0.0 < threshold < 0.5:
        raise InvalidParameterError(f"Invalid threshold: {threshold!r}; pass α/m in (0, 0.5)")
    moments: dict[NoiseLaw, LawMoments] = {}
    arrays = [(law, np.asarray(r, dtype=np.float64)) for law, r in residuals]
    for law, r in arrays:
        moments.setdefault(law, LawMoments(law)).add(r)
    scale = scale_test(list(moments.values()), 1.0 - threshold)
    fit = FitCounts()
    factors = {law: fitted_factor(m) for law, m in moments.items()}
    for law, r in arrays:
        fit.add(r, law.scaled(factors[law]), rng)
    return judge_published(
        geolevel,
        scale=scale,
        fit=fit_test(fit),
        eps_interval=epsilon_interval(components, delta, scale.k_low, scale.k_high),
        declared_eps=declared_eps,
        delta=delta,
        threshold=threshold,
        measured_at=measured_at or geolevel,
        laws=sorted({law.describe() for law in moments}),
        tradeoff=tradeoff_test(arrays, conf=1.0 - threshold, delta=delta, rng=rng),
    )
