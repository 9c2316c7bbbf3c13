"""Whether an EPL estimate is resolved at the run's replicates, and how many replicates resolve it.

The rule (docs/guide.md, "Is an EPL resolved?"), from stored numbers only:

* The **floor** (``epl_null_upper``) is the quantile of the estimator on draws of a discrete
  Gaussian of the residuals' spread: noise of exactly the claimed size, at the same sample size n.
* The **claimed noise's own loss** over the estimate's window is ``L0 = max |Δ(2x + Δ)| / (2σ²)``
  over the x of the window (the stored ``surface_pooled_x``; Δ the neighbour shift, σ² the query's
  claimed variance). The estimator smooths with a kernel of h = f·sd, which flattens the loss of
  Gaussian noise by 1/(1 + f²): with unlimited residuals it returns ``L = L0 / (1 + f²)`` on the
  claimed noise.
* The floor's **excess** ``e = floor − L`` is what small samples add; it shrinks like 1/√n
  (measured on the estimator: e·√n stays within ±10 % from n = 64 to 4,096).
* An estimate can show a loss beyond the claimed noise only by exceeding its floor; the floor lies
  within :data:`RESOLUTION` (10 %) of the claimed noise's loss once ``e ≤ 0.1·L``. Until then the
  estimate is **not resolved**: it cannot tell a loss 10 % above the claimed one from the noise.
* n grows in proportion to the replicates R (every replicate adds the same residuals), so the
  replicates that resolve it are ``R* = ⌈R·(e / (0.1·L))²⌉``.

Composed over queries, the excesses and the losses add: ``e = Σ e_q``, ``L = Σ L_q`` (the sum of
the floors is a conservative floor of the sum), and ``R*`` follows the same way.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from flows.report.release_basis import PRACTICAL_REPLICATES, ReleaseBasis
from flows.report.store_data import float_values, str_values

#: Resolved: the floor within this fraction of the claimed noise's loss over the window.
RESOLUTION = 0.1
#: Bandwidth factor of the bias-aware estimate in stores that do not record their knobs.
DEFAULT_FACTOR = 0.3


@dataclass(frozen=True)
class Resolution:
    """The floor of an estimate beside the claimed noise's loss, and the replicates it needs."""

    floor: float
    loss: float  # L: the estimator's value on the claimed noise with unlimited residuals
    excess: float  # e = floor - L
    replicates: int | None  # R of the run (None: unknown)
    needed: int | None  # R* (None: resolved, or not computable)
    needed_residuals: int | None  # n* for the same (None: resolved, or not computable)

    @property
    def resolved(self) -> bool:
        return math.isfinite(self.excess) and self.excess <= RESOLUTION * self.loss

    @property
    def known(self) -> bool:
        return math.isfinite(self.loss) and math.isfinite(self.excess) and self.loss > 0


def needed_scale(excess: float, loss: float) -> float:
    """How many times the residuals (and replicates) the run needs for ``excess ≤ 0.1·loss``
    (1 when it is there already)."""
    if not (math.isfinite(excess) and math.isfinite(loss)) or loss <= 0:
        return math.nan
    return max(1.0, (excess / (RESOLUTION * loss)) ** 2)


def _settings(epl: xr.Dataset) -> dict[str, Any]:
    try:
        knobs = json.loads(epl.attrs.get("bias_aware_settings", "{}"))
    except (TypeError, ValueError):
        knobs = {}
    return knobs if isinstance(knobs, dict) else {}


def null_quantile(epl: xr.Dataset) -> float:
    """The quantile of the matched reference stored as the floor (older stores: 0.95)."""
    q = _settings(epl).get("null_quantile", 0.95)
    try:
        q = float(q)
    except (TypeError, ValueError):
        return 0.95
    return q if 0 < q < 1 else 0.95


def chance_of_at_least(k: int, n: int, p: float) -> float:
    """P(X ≥ k) for X ~ Binomial(n, p): how often noise of exactly the claimed size puts k or more
    of n independent estimates above floors at its (1 − p) quantile."""
    if k <= 0:
        return 1.0
    return float(sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1)))


def smoothing_factor(knobs: dict[str, Any], sigma2: float, n: float) -> float:
    """f = h / sd of the bias-aware kernel, from its knobs (``bandwidth_kind``, ``bandwidth``)."""
    kind = str(knobs.get("bandwidth_kind", "factor"))
    value = knobs.get("bandwidth")
    if kind == "factor":
        return float(value) if value is not None else DEFAULT_FACTOR
    if kind == "absolute" and value is not None and sigma2 > 0:
        return float(value) / math.sqrt(sigma2)
    if kind == "scott" and n > 0:
        return float(n ** (-1 / 5))
    if kind == "silverman" and n > 0:
        return float((3 * n / 4) ** (-1 / 5))
    return DEFAULT_FACTOR


def claimed_loss(x: np.ndarray, sigma2: float, shift: float) -> float:
    """L0: the largest loss log p(x)/p(x + Δ) = Δ(2x + Δ)/(2σ²) of a discrete Gaussian of variance
    σ² over the window's x (NaN without x or σ²)."""
    x = x[np.isfinite(x)]
    if x.size == 0 or not (math.isfinite(sigma2) and sigma2 > 0):
        return math.nan
    ends = np.array([x.min(), x.max()])
    return float(np.max(np.abs(shift * (2 * ends + shift))) / (2 * sigma2))


def resolutions(epl: xr.Dataset, replicates: int | None) -> dict[tuple[int, int], Resolution]:
    """The :class:`Resolution` of every (geolevel, query) with status ``ok`` and a floor."""
    floor, sigma2 = float_values(epl, "epl_null_upper"), float_values(epl, "sigma2")
    xs, n_res = float_values(epl, "surface_pooled_x"), float_values(epl, "n_residuals")
    if floor is None or sigma2 is None:
        return {}
    status = (
        np.array(str_values(epl["epl_status"].values)).reshape(floor.shape)
        if "epl_status" in epl.variables
        else np.full(floor.shape, "ok")
    )
    knobs = _settings(epl)
    shift = float(knobs.get("shift", 1.0) or 1.0)
    out: dict[tuple[int, int], Resolution] = {}
    for i, q in zip(*np.nonzero((status == "ok") & np.isfinite(floor)), strict=True):
        i, q = int(i), int(q)
        n = float(n_res[i, q]) if n_res is not None else math.nan
        f = smoothing_factor(knobs, float(sigma2[i, q]), n)
        l0 = claimed_loss(xs[i, q], float(sigma2[i, q]), shift) if xs is not None else math.nan
        loss = l0 / (1 + f * f)
        out[(i, q)] = _resolution(float(floor[i, q]), loss, replicates, n)
    return out


def _resolution(floor: float, loss: float, replicates: int | None, n: float) -> Resolution:
    excess = floor - loss
    scale = needed_scale(excess, loss)
    needed = needed_n = None
    if math.isfinite(scale) and scale > 1:
        if replicates:
            needed = math.ceil(replicates * scale)
        if math.isfinite(n) and n > 0:
            needed_n = math.ceil(n * scale)
    return Resolution(floor, loss, excess, replicates, needed, needed_n)


def composed_resolution(
    parts: list[Resolution], replicates: int | None, n: float = math.nan
) -> Resolution | None:
    """The resolution of a sum of estimates: their floors, losses and excesses added."""
    if not parts or not all(p.known for p in parts):
        return None
    return _resolution(sum(p.floor for p in parts), sum(p.loss for p in parts), replicates, n)


def _count(n: int) -> str:
    return f"{n:,}".replace(",", "\u202f")


def resolution_words(
    res: Resolution | None, *, short: bool = False, basis: ReleaseBasis | None = None
) -> str:
    """ "resolved", or the replicates (else the residuals) that resolve the estimate; "" when the
    store does not tell. ``short``: without the run's replicates (a table's caption gives them).
    More than :data:`~flows.report.release_basis.PRACTICAL_REPLICATES` are never printed: the
    words say what dominates the estimate instead (``basis``: the store's release)."""
    if res is None or not res.known:
        return ""
    if res.resolved:
        return "resolved"
    basis = basis or ReleaseBasis("")
    if res.needed is not None and res.replicates:
        if res.needed > PRACTICAL_REPLICATES:
            if short:
                return f"not resolvable: {basis.dominates(short=True)}"
            return f"not resolved at {basis.runs(res.replicates)}: {basis.dominates()}"
        need = _count(res.needed)
        if not basis.simulated:  # more published runs, not a longer run
            if short:
                return f"needs ≥ {need} runs"
            return f"not resolved at {basis.runs(res.replicates)}: needs ≥ {need} published runs"
        if short:
            return f"run ≥ {need} replicates"
        return f"not resolved at {basis.runs(res.replicates)}: run ≥ {need}"
    if res.needed_residuals is not None:
        return f"not resolved: needs ≥ {_count(res.needed_residuals)} residuals"
    return ""
