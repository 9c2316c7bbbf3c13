"""Composed EPL: the empirical loss of the *joint* release of every count that contains one person.

A person in leaf ℓ is counted once at every released level j — in the unit ``u_j(ℓ)`` on the path
from ℓ to the root — and a neighbouring database shifts all those true counts by one at once. The
joint privacy loss is ``L(x) = log p(x)/p(x + 1)`` for the vector x of the path's residuals
(x ∈ ℝ^L, 1 = (1, …, 1)), not the loss of any single level. "ε/(J+1) per level" of RDPC is not
slack: a person appears at every level, so the losses add up.

:func:`composed_epl` reports, from the residuals of every released level and the leaf → unit maps:

* ``epl_sum`` = Σ_j EPL_j, the bias-aware EPL of each level (:func:`auditlib.epl.estimate_epl`)
  added up. If the levels' residuals are **independent**, ``L(x) = Σ_j L_j(x_j)`` and the maximum
  of |L| over the product of the levels' windows is the sum of the sign-aligned per-level maxima,
  ≤ Σ_j max |L_j| (equal for symmetric noise): ``epl_sum`` is then the composed EPL, with each
  level's upward small-sample bias (the top levels hold few units). ``ci_low``/``ci_high`` add the
  per-level bootstrap intervals: with L levels at confidence c they cover the sum with probability
  ≥ 1 − L(1 − c).
* ``correlation`` — the L × L Pearson correlations of the path residuals (one path per leaf and
  replicate), and ``dependence_factor`` = 1ᵀΣ̂⁻¹1 / Σ_j 1/Σ̂_jj, the ratio of the joint loss to the
  sum of the levels' losses *if the residuals were jointly Gaussian* with covariance Σ̂ (the
  Gaussian loss along 1 is linear with slope 1ᵀΣ⁻¹1). It is 1 under independence; above 1 the
  dependence makes ``epl_sum`` an underestimate (e.g. levels whose residuals nearly cancel), below
  1 an overestimate (e.g. the same noise published twice).
* ``epl_projection`` — the EPL of the one-dimensional statistic T = wᵀx/wᵀ1, w = Σ̂⁻¹1 (the
  Gaussian-optimal combination; a shift of 1 on every level shifts T by exactly 1). T is a
  post-processing of the joint release, so its true loss is a **lower bound** on the joint loss
  whatever the dependence; its estimate carries the estimator's small-sample upward bias. For
  independent levels of Laplace-like (geometric) noise it is well below the joint loss (averaging
  hides the heavy tails, as for ADPC); an ``epl_projection`` above ``epl_sum`` shows that
  dependence makes the sum an underestimate.

Estimates assume, as every residual EPL does, that the residual law does not depend on the true
counts (the shift of one person moves x by 1 and nothing else).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.epl.bias_aware import EPLEstimate, Seed, estimate_epl
from auditlib.exceptions import InvalidParameterError

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ComposedEPL:
    """Composed EPL of the counts containing one person; see the module docstring."""

    epl_sum: float
    ci_low: float
    ci_high: float
    epl_projection: float
    dependence_factor: float
    per_level: tuple[float, ...]
    per_level_status: tuple[str, ...]
    correlation: FloatArray = field(compare=False, repr=False)
    n_paths: int
    status: str  # ok | invariant (a level without noise: inf) | too_few (a level unmeasured)

    @property
    def max_abs_correlation(self) -> float:
        """Largest |correlation| between two different levels (NaN with one level)."""
        c = self.correlation
        if c.shape[0] < 2:
            return math.nan
        off = np.abs(c[~np.eye(c.shape[0], dtype=bool)])
        return float(np.max(off))

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "correlation"}
        out["per_level"] = list(self.per_level)
        out["per_level_status"] = list(self.per_level_status)
        out["correlation"] = self.correlation.tolist()
        out["max_abs_correlation"] = self.max_abs_correlation
        return out


def path_residuals(
    levels: Sequence[npt.ArrayLike], unit_of_leaf: Sequence[npt.ArrayLike]
) -> FloatArray:
    """Residuals along every leaf's path: (replicates × leaves, L).

    ``levels[j]`` is level j's residuals, (replicates, units_j) (1-D: one replicate);
    ``unit_of_leaf[j][ℓ]`` the unit of level j that contains leaf ℓ. Row ``r·n_leaves + ℓ`` holds
    replicate r's residuals of the L units containing leaf ℓ.
    """
    if len(levels) != len(unit_of_leaf) or not levels:
        raise InvalidParameterError(
            f"Invalid levels: {len(levels)} residual arrays and {len(unit_of_leaf)} leaf maps; "
            "pass one of each per released level (at least one)."
        )
    arrays = [np.atleast_2d(np.asarray(a, dtype=np.float64)) for a in levels]
    maps = [np.asarray(m, dtype=np.int64) for m in unit_of_leaf]
    reps = arrays[0].shape[0]
    n_leaves = maps[0].size
    for j, (a, m) in enumerate(zip(arrays, maps, strict=True)):
        if a.ndim != 2 or a.shape[0] != reps:
            raise InvalidParameterError(
                f"Invalid level {j}: residuals of shape {a.shape}; every level needs "
                f"({reps}, units) — the same replicates."
            )
        if m.ndim != 1 or m.size != n_leaves:
            raise InvalidParameterError(
                f"Invalid leaf map of level {j}: shape {m.shape}; need ({n_leaves},), one unit "
                "per leaf."
            )
        if m.size and (m.min() < 0 or m.max() >= a.shape[1]):
            raise InvalidParameterError(
                f"Invalid leaf map of level {j}: units outside 0..{a.shape[1] - 1}."
            )
        if not np.isfinite(a).all():
            raise InvalidParameterError(f"Invalid residuals of level {j}: NaN or infinite values.")
    out = np.empty((reps, n_leaves, len(arrays)), dtype=np.float64)
    for j, (a, m) in enumerate(zip(arrays, maps, strict=True)):
        out[:, :, j] = a[:, m]
    return out.reshape(reps * n_leaves, len(arrays))


def level_correlations(paths: npt.ArrayLike) -> FloatArray:
    """Pearson correlations between the columns (levels) of ``paths`` (NaN for a constant level)."""
    p = np.asarray(paths, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] < 2:
        raise InvalidParameterError(
            f"Invalid paths: shape {p.shape}; need (paths ≥ 2, levels), see path_residuals."
        )
    c = p - p.mean(axis=0)
    cov = c.T @ c / (p.shape[0] - 1)
    sd = np.sqrt(np.diag(cov))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / np.outer(sd, sd)
    return np.asarray(corr, dtype=np.float64)


def composed_epl(
    levels: Sequence[npt.ArrayLike],
    unit_of_leaf: Sequence[npt.ArrayLike],
    *,
    n_boot: int | None = 200,
    confidence: float = 0.9,
    seed: Seed = None,
    **kwargs: Any,
) -> ComposedEPL:
    """Composed EPL of the joint release of the L counts containing one person.

    ``levels``/``unit_of_leaf`` as in :func:`path_residuals`; every level's EPL uses all of its
    units' residuals (:func:`auditlib.epl.estimate_epl` with ``kwargs``: bandwidth, percentiles, …).
    Which way each number errs: see the module docstring.
    """
    paths = path_residuals(levels, unit_of_leaf)
    n_levels = paths.shape[1]
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)  # type: ignore[arg-type]
    if isinstance(seed, np.random.Generator):
        ss = np.random.SeedSequence(int(seed.integers(2**63)))
    children = ss.spawn(n_levels + 1)
    ests: list[EPLEstimate] = []
    for j in range(n_levels):
        r = np.asarray(levels[j], dtype=np.float64).ravel()
        ests.append(
            estimate_epl(
                r, n_boot=n_boot, confidence=confidence, n_null=None, seed=children[j], **kwargs
            )
        )
    per = tuple(float(e.epl) for e in ests)
    statuses = tuple(e.status for e in ests)
    corr = level_correlations(paths)
    if "invariant" in statuses:
        status = "invariant"
    elif all(s == "ok" for s in statuses):
        status = "ok"
    else:
        status = next(s for s in statuses if s != "ok")
    if status != "ok":
        value = math.inf if status == "invariant" else math.nan
        return ComposedEPL(
            value,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            per,
            statuses,
            corr,
            paths.shape[0],
            status,
        )
    cov = np.cov(paths, rowvar=False).reshape(n_levels, n_levels)
    ones = np.ones(n_levels)
    # pseudo-inverse: the same noise published twice gives a singular Σ̂, whose 1ᵀΣ̂⁺1 is still the
    # Gaussian joint loss (one level's, not the sum)
    w = np.linalg.pinv(cov, hermitian=True) @ ones
    dep = float(ones @ w) / float(np.sum(1.0 / np.diag(cov)))
    projection = math.nan
    if np.isfinite(w).all() and float(ones @ w) > 0:
        t = paths @ (w / float(ones @ w))
        projection = float(estimate_epl(t, n_boot=None, n_null=None, **kwargs).epl)
    return ComposedEPL(
        float(sum(per)),
        float(sum(e.ci_low for e in ests)),
        float(sum(e.ci_high for e in ests)),
        projection,
        dep,
        per,
        statuses,
        corr,
        int(paths.shape[0]),
        status,
    )
