"""The trade-off test: do the residuals show a count less private than its declared noise allows?

Under a declaration of additive noise independent of the true counts, a query's residuals are
draws of its noise N, so residuals r and r′ + Δ (Δ = 1, the shift one person makes to one count)
are draws of the outputs P = N and Q = N + Δ of that count on neighbouring data — without the
declared *family* being assumed. :mod:`auditlib.mpl.tradeoff_lower` turns such draws into points
(α_u, β_u) certified to lie on or above the true trade-off curve T(P, Q) (with probability
≥ ``conf`` all at once). If one lies below the declared noise's curve — below its certified lower
end, the valid f-DP guarantee of the declared law — then T falls below the declared curve there:
the noise is less private than declared, whatever its shape. The residuals of each declared law
are split at random into four equal parts (selection and fresh draws of P and of Q), at most
:data:`MAX_PER_PART` each; several laws share the risk (Bonferroni).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.claims.laws import NoiseLaw
from auditlib.mpl.protocol import OutputKind

#: the most residuals of one law in each of the four parts (larger sets are subsampled)
MAX_PER_PART = 50_000
#: fewest residuals of a law worth testing (fewer: the law is left out)
MIN_RESIDUALS = 200


@lru_cache(maxsize=64)
def _one_count(law: NoiseLaw) -> Any:
    """The certified accountant of one count with the law's noise (built once per law)."""
    from auditlib.accounting import PrivacyLossComposition

    return PrivacyLossComposition([law.loss(1)])


@dataclass(frozen=True)
class TradeoffTest:
    """The trade-off test's result: ``below`` (a certified point lies under the declared curve),
    the most telling point (``alpha``, ``beta``: the largest drop under the curve, or the
    smallest margin above it), the declared curve's certified lower end there (``declared_beta``),
    the lower confidence bound on one count's ε(δ) the points imply (``eps_lower``) beside the
    declared one count's ε(δ) (``declared_eps``), the residuals used (``n``) and the law."""

    below: bool
    alpha: float
    beta: float
    declared_beta: float
    eps_lower: float
    declared_eps: float
    n: int
    law: str
    conf: float


def tradeoff_test(
    residuals: Sequence[tuple[NoiseLaw, npt.ArrayLike]],
    *,
    conf: float,
    delta: float,
    rng: np.random.Generator,
) -> TradeoffTest | None:
    """The trade-off test of each declared law on its residuals (see the module docstring), at
    confidence ``conf`` over all laws; the result of the most telling law, or ``None`` when no
    law has :data:`MIN_RESIDUALS` residuals."""
    from auditlib.accounting import tradeoff
    from auditlib.mpl.tradeoff_lower import tradeoff_from_samples

    by_law: dict[NoiseLaw, list[npt.NDArray[np.float64]]] = {}
    for law, r in residuals:
        by_law.setdefault(law, []).append(np.asarray(r, dtype=np.float64).ravel())
    pooled = {law: np.concatenate(parts) for law, parts in by_law.items()}
    pooled = {law: r for law, r in pooled.items() if r.size >= MIN_RESIDUALS}
    if not pooled:
        return None
    each = 1.0 - (1.0 - conf) / len(pooled)
    best: TradeoffTest | None = None
    for law in sorted(pooled, key=lambda x: (x.mechanism, x.parameter)):
        r = rng.permutation(pooled[law])
        m = min(r.size // 4, MAX_PER_PART)
        sel_x, sel_y, fresh_x, fresh_y = (r[i * m : (i + 1) * m] for i in range(4))
        kind: OutputKind = "discrete" if law.discrete else "continuous"
        if law.discrete:
            sel_x, sel_y, fresh_x, fresh_y = (
                np.round(a).astype(np.int64) for a in (sel_x, sel_y, fresh_x, fresh_y)
            )
        pts = tradeoff_from_samples(
            sel_x,
            sel_y + 1,
            fresh_x,
            fresh_y + 1,
            kind=kind,
            conf=each,
        )
        comp = _one_count(law)
        declared = np.asarray(tradeoff(comp, np.clip(pts.alpha_upper, 0.0, 1.0)).lower)
        margin = pts.beta_upper - declared
        k = int(np.argmin(margin))
        res = TradeoffTest(
            below=bool(margin[k] < 0.0),
            alpha=float(pts.alpha_upper[k]),
            beta=float(pts.beta_upper[k]),
            declared_beta=float(declared[k]),
            eps_lower=pts.epsilon_lower(delta),
            declared_eps=float(comp.epsilon(delta).upper),
            n=4 * m,
            law=law.describe(),
            conf=conf,
        )
        if best is None or (res.beta - res.declared_beta) < (best.beta - best.declared_beta):
            best = res
    return best
