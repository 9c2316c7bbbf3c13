"""Flaxman & Petti's stratified releases: noisy totals and strata made consistent by L1 optimization.

* **SA3** (:func:`stratified_release`): every unit's total gets ``G(ε₁)`` and each of its stratified
  counts ``G(ε₂)`` (two-sided geometric, ``P(k) ∝ e^{−ε|k|}``, :class:`TwoSidedGeometric`); then the
  released strata are the non-negative integers ``y`` closest to the measurements in weighted L1,

      minimize  w_T·|Σ_c y_c − T̃| + w_S·Σ_c |y_c − x̃_c|   over  y ∈ ℤ^k, y ≥ 0,

  and the released total is ``Σ_c y_c`` (consistent by construction). ``(ε₁ + ε₂)``-DP by sequential
  composition. The default weights ``w = ε`` make it the maximum-likelihood consistent answer
  (``−log P(k) = ε|k| + const``).
* **SA4** (:func:`invariant_release`): the strata get ``G(ε)``, then the released strata are the
  non-negative integers closest in L1 to the measurements whose sum over each county equals the
  county's *true* total (an invariant — released exactly, so not DP).

**Exact solution (no LP solver).** Write ``z = max(x̃, 0)`` and ``Z = Σ z``. For ``y ≥ 0``,
``|y_c − x̃_c| = |y_c − z_c| + (z_c − x̃_c)`` (if ``x̃_c < 0`` then ``z_c = 0 ≤ y_c``), so
``Σ|y − x̃| = C₀ + Σ|y − z| ≥ C₀ + |Σy − Z|`` with ``C₀ = Σ max(−x̃, 0)`` (triangle inequality), with
equality whenever ``y`` moves from ``z`` in one direction only (only increases, or only decreases of
positive cells — possible for every target ``S ≥ 0``). Hence with a prescribed sum ``S`` the optimal
value is ``C₀ + |S − Z|`` (SA4, per county), and in SA3 the best sum minimizes
``w_T·|S − T̃| + w_S·|S − Z|`` over ``S ≥ 0``: a weighted median — ``S = Z`` if ``w_S > w_T``,
``S = max(T̃, 0)`` if ``w_T > w_S``; with equal weights every ``S`` between them is optimal and the
midpoint (rounded down) is taken.

**Which optimum.** L1 optima are not unique (any cells may absorb the ``|S − Z|`` moves). Among them this
module returns one that also minimizes ``Σ (y_c − x̃_c)²``: the moves are spread evenly (water-filling;
removals only from positive cells, never below 0; additions first to the cells whose deviation
``y_c − x̃_c`` is smallest). Integer levels leave ``r`` unit moves to cells tied at the water level;
these are drawn uniformly at random from the tied cells (from the caller's Generator), so no cell
is favoured by its position. Everything is vectorized over units and groups (a bisection on the water
level of all groups at once).

An LP solver (Flaxman & Petti's appendix used pyomo + ipopt) returns *some* vertex of the optimal face, which depends on
the solver; this exact choice makes the release, and hence its residual law, well defined.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms import TwoSidedGeometric
from auditlib.mechanisms.base import check_rng, positive_finite

IntArray = npt.NDArray[np.int64]


def _as_int_array(name: str, value: npt.ArrayLike, ndim: int) -> IntArray:
    a = np.asarray(value)
    if a.ndim != ndim:
        raise InvalidParameterError(f"Invalid {name}: shape {a.shape}; need a {ndim}-D array")
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a) | (a != np.round(a))
        if bad.any():
            i = np.unravel_index(int(np.argmax(bad)), a.shape)
            raise InvalidParameterError(
                f"Invalid {name}{[int(j) for j in i]} = {a[i].item()!r}; counts must be whole numbers"
            )
    elif a.dtype.kind not in "iu" or a.dtype.kind == "b":
        raise InvalidParameterError(f"Invalid {name}: dtype {a.dtype}; need integer counts")
    return a.astype(np.int64)


def _largest_level(
    total_at: Callable[[IntArray], IntArray], budget: IntArray, lo: IntArray, hi: IntArray
) -> IntArray:
    """Per group, the largest integer level ``t`` in ``[lo, hi]`` with ``total_at(t) ≤ budget``
    (``total_at`` non-decreasing, ``total_at(lo) ≤ budget``): a bisection of all groups at once."""
    lo, hi = lo.copy(), hi.copy()
    while np.any(lo < hi):
        mid = lo + (hi - lo + 1) // 2
        ok = total_at(mid) <= budget
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid - 1)
    return lo


def _pick_in_groups(
    eligible: npt.NDArray[np.bool_], group: IntArray, count: IntArray, rng: np.random.Generator
) -> npt.NDArray[np.bool_]:
    """A uniformly random choice of ``count[g]`` eligible cells in every group ``g``: the cells
    with the ``count[g]`` smallest of i.i.d. uniform keys, found by one sort on ``group + key/2``
    (exact for group ids below 2^40)."""
    out = np.zeros(eligible.shape, dtype=bool)
    idx = np.flatnonzero(eligible & (count[group] > 0))
    if idx.size == 0:
        return out
    g = group[idx]
    idx = idx[np.argsort(g + 0.5 * rng.random(idx.size))]
    g = group[idx]
    first = np.searchsorted(g, g, side="left")
    rank = np.arange(idx.size) - first
    out[idx[rank < count[g]]] = True
    return out


def adjust_to_totals(
    measured: npt.ArrayLike,
    group: npt.ArrayLike,
    target: npt.ArrayLike,
    rng: np.random.Generator,
) -> IntArray:
    """Non-negative integers ``y`` minimizing ``Σ|y − x̃|``, then ``Σ(y − x̃)²``, subject to
    ``Σ_{c in g} y_c = target[g]`` for every group ``g`` (see the module docstring for the proof).

    ``measured`` (x̃, integers, any sign) and ``group`` (``0..G−1``) are flat, one entry per cell;
    ``target`` holds one non-negative integer per group. Remaining ties are broken at random.
    """
    rng = check_rng(rng)
    x = _as_int_array("measured", measured, 1)
    g = _as_int_array("group", group, 1)
    t = _as_int_array("target", target, 1)
    if g.shape != x.shape:
        raise InvalidParameterError(
            f"Invalid group: shape {g.shape}; need one group per measured cell {x.shape}"
        )
    n_groups = t.size
    if x.size and (g.min() < 0 or g.max() >= n_groups):
        raise InvalidParameterError(
            f"Invalid group ids {g.min()}..{g.max()}; need 0..{n_groups - 1} (one target per group)"
        )
    if n_groups and t.min() < 0:
        i = int(np.argmin(t))
        raise InvalidParameterError(
            f"Invalid target[{i}] = {t[i]}; totals of non-negative counts must be >= 0"
        )
    empty = np.bincount(g, minlength=n_groups) == 0
    if np.any(empty & (t > 0)):
        i = int(np.argmax(empty & (t > 0)))
        raise InvalidParameterError(f"Invalid target[{i}] = {t[i]}: group {i} has no cells")
    z = np.maximum(x, 0)
    y = z.copy()
    delta = t - np.bincount(g, weights=z, minlength=n_groups).astype(np.int64)
    zero = np.zeros(n_groups, dtype=np.int64)

    # removals (delta < 0): lower positive cells to a common level, never below 0
    remove = np.maximum(-delta, 0)
    if remove.any():
        # only the positive cells of groups that lose people take part
        cells = np.flatnonzero((z > 0) & (remove[g] > 0))
        gp, zp = g[cells], z[cells]
        hi = np.zeros(n_groups, dtype=np.int64)
        np.maximum.at(hi, gp, zp)

        def removed(level: IntArray) -> IntArray:
            return np.bincount(gp, weights=np.minimum(zp, level[gp]), minlength=n_groups).astype(
                np.int64
            )

        level = _largest_level(removed, remove, zero, hi)
        y[cells] -= np.minimum(zp, level[gp])
        left = remove - removed(level)
        y -= _pick_in_groups((z > level[g]) & (remove[g] > 0), g, left, rng)

    # additions (delta > 0): raise the smallest deviations e = z − x̃ ≥ 0 to a common level
    add = np.maximum(delta, 0)
    if add.any():
        e = z - x
        hi = add.copy()
        e_max = np.zeros(n_groups, dtype=np.int64)
        np.maximum.at(e_max, g, e)
        hi += e_max

        def added(level: IntArray) -> IntArray:
            return np.bincount(g, weights=np.maximum(level[g] - e, 0), minlength=n_groups).astype(
                np.int64
            )

        level = _largest_level(added, add, zero, hi)
        y += np.maximum(level[g] - e, 0)
        left = add - added(level)
        y += _pick_in_groups(e <= level[g], g, left, rng)
    return y


def l1_consistent(
    noisy_total: npt.ArrayLike,
    noisy_strata: npt.ArrayLike,
    rng: np.random.Generator,
    *,
    total_weight: float = 1.0,
    strata_weight: float = 1.0,
) -> IntArray:
    """SA3's post-processing: per unit (row), the non-negative integer strata minimizing
    ``w_T·|Σy − T̃| + w_S·Σ|y − x̃|`` (ties: see the module docstring). Returns ``(n_units, k)``."""
    t = _as_int_array("noisy_total", noisy_total, 1)
    x = _as_int_array("noisy_strata", noisy_strata, 2)
    if x.shape[0] != t.size:
        raise InvalidParameterError(
            f"Invalid noisy_strata: {x.shape[0]} rows for {t.size} noisy totals; need one row per unit"
        )
    wt = positive_finite("total_weight", total_weight)
    ws = positive_finite("strata_weight", strata_weight)
    z_sum = np.maximum(x, 0).sum(axis=1)
    t_pos = np.maximum(t, 0)
    if ws > wt:
        s = z_sum
    elif wt > ws:
        s = t_pos
    else:
        s = (z_sum + t_pos) // 2
    n, k = x.shape
    group = np.repeat(np.arange(n, dtype=np.int64), k)
    return adjust_to_totals(x.ravel(), group, s, rng).reshape(n, k)


@dataclass(frozen=True)
class StratifiedRelease:
    """True and released strata ``(n_units, k)`` of one run, with the noisy measurements
    (``noisy_total`` is None when no total is measured, as in SA4)."""

    true_strata: IntArray
    noisy_total: IntArray | None
    noisy_strata: IntArray
    strata: IntArray

    @property
    def total(self) -> IntArray:
        """Released totals: the sums of the released strata."""
        return self.strata.sum(axis=1)

    def strata_residuals(self) -> IntArray:
        """Released − true, every stratum of every unit (zero cells included)."""
        return self.strata - self.true_strata

    def total_residuals(self) -> IntArray:
        return self.total - self.true_strata.sum(axis=1)


def _check_truth(true_strata: npt.ArrayLike) -> IntArray:
    x = _as_int_array("true_strata", true_strata, 2)
    if x.size and x.min() < 0:
        i = np.unravel_index(int(np.argmin(x)), x.shape)
        raise InvalidParameterError(
            f"Invalid true_strata{[int(j) for j in i]} = {x[i]}; true counts must be >= 0"
        )
    return x


def stratified_release(
    true_strata: npt.ArrayLike,
    epsilon_total: float,
    epsilon_strata: float,
    rng: np.random.Generator,
    *,
    weights: tuple[float, float] | None = None,
) -> StratifiedRelease:
    """SA3: ``G(ε₁)`` on each unit's total, ``G(ε₂)`` on each stratum, then :func:`l1_consistent`.

    ``weights = (w_T, w_S)`` defaults to ``(ε₁, ε₂)`` (maximum likelihood).
    """
    x = _check_truth(true_strata)
    e1 = positive_finite("epsilon_total", epsilon_total)
    e2 = positive_finite("epsilon_strata", epsilon_strata)
    rng = check_rng(rng)
    wt, ws = weights if weights is not None else (e1, e2)
    noisy_total = x.sum(axis=1) + TwoSidedGeometric(e1).rvs(x.shape[0], rng)
    noisy_strata = x + TwoSidedGeometric(e2).rvs(x.shape, rng)
    y = l1_consistent(noisy_total, noisy_strata, rng, total_weight=wt, strata_weight=ws)
    return StratifiedRelease(x, noisy_total, noisy_strata, y)


def invariant_release(
    true_strata: npt.ArrayLike,
    county: npt.ArrayLike,
    epsilon: float,
    rng: np.random.Generator,
) -> StratifiedRelease:
    """SA4: ``G(ε)`` on each stratum of each unit, then the L1-closest non-negative integers whose
    sum over every county (``county[i]`` in ``0..C−1`` for unit i) is the county's true total."""
    x = _check_truth(true_strata)
    eps = positive_finite("epsilon", epsilon)
    rng = check_rng(rng)
    c = _as_int_array("county", county, 1)
    if c.shape != (x.shape[0],):
        raise InvalidParameterError(
            f"Invalid county: shape {c.shape}; need one county per unit ({x.shape[0]})"
        )
    if c.size and c.min() < 0:
        raise InvalidParameterError(f"Invalid county id {c.min()}; county ids are 0..C-1")
    n, k = x.shape
    n_counties = int(c.max()) + 1 if n else 0
    truth_total = np.bincount(c, weights=x.sum(axis=1), minlength=n_counties).astype(np.int64)
    noisy = x + TwoSidedGeometric(eps).rvs(x.shape, rng)
    y = adjust_to_totals(noisy.ravel(), np.repeat(c, k), truth_total, rng).reshape(n, k)
    return StratifiedRelease(x, None, noisy, y)
