"""Data-specific privacy loss, Algorithm 3 (DPL) of Askin, Kutta & Dette, and the region C it maximizes over.

For one pair of neighbouring inputs (x, x′), draw n outputs at each, estimate both densities on the
region C (TDDE for discrete outputs, TKDE for continuous ones) and return

    ε̂_{x,x′} = max_{t ∈ C} ℓ̂(t),   ℓ̂(t) = |ln f̂_x(t) − ln f̂_x′(t)|,   t̂ = argmax,

with the whole loss curve. ε̂ estimates ε_{x,x′,C} = sup_{t∈C} ℓ_{x,x′}(t) (Theorem 1, eq. (21)); it
is a point estimate, biased *down* when the densities are hard to separate from the floor τ and
*up* by the maximum of noise over C (the upward bias is why MPL re-estimates at t̂ on fresh data).

For continuous outputs C is a grid: :meth:`Region.interval` (d = 1) or :meth:`Region.box` (d > 1);
the supremum over the continuum is approximated by the maximum over the grid. For discrete outputs
C is a finite set of integers (:meth:`Region.integers`) and nothing is approximated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms.base import check_rng
from auditlib.mpl.density import check_bandwidth, check_tau, silverman_bandwidth, tdde, tkde
from auditlib.mpl.protocol import (
    MechanismUnderTest,
    OutputKind,
    check_kind,
    check_sample_pair,
    check_sample_size,
)

DEFAULT_TAU = 1e-3  # the floor of Askin, Kutta & Dette §V for n = 2·10⁴
DEFAULT_GRID = 201  # grid points of a 1-D continuous region

#: Most evaluation points of a region C (all axes together: ``grid_size ** d`` for a box, ``hi − lo
#: + 1`` for integers). Each pair keeps a loss curve over them (8 bytes a point) and the estimators
#: evaluate both densities there (continuous d > 1: ``n`` kernel terms a point), so 10⁶ points
#: cost 8 MB a curve and minutes of kernel sums at the default n; a larger C is refused before
#: any point is built.
MAX_REGION_POINTS = 10**6


def _check_region_points(m: int, what: str) -> None:
    if m > MAX_REGION_POINTS:
        raise InvalidParameterError(
            f"Invalid region: {what} = {m} points; the largest allowed is {MAX_REGION_POINTS} "
            "(MAX_REGION_POINTS); use a smaller region or a coarser grid."
        )


@dataclass(frozen=True, eq=False)
class Region:
    """The region C: the evaluation points and which of them lie on the edge of C.

    ``points``: (m,) int64 for discrete outputs, (m,) or (m, d) float64 for continuous ones;
    ``bounds``: ((lo, hi), ...) per dimension; ``edge``: (m,) bool.
    """

    kind: OutputKind
    points: npt.NDArray[Any]
    edge: npt.NDArray[np.bool_]
    bounds: tuple[tuple[float, float], ...]

    @property
    def dim(self) -> int:
        """Dimension of the outputs."""
        return len(self.bounds)

    @classmethod
    def interval(cls, lo: float, hi: float, *, grid_size: int = DEFAULT_GRID) -> Region:
        """C = [lo, hi] ⊂ ℝ on ``grid_size`` equally spaced points (ends included)."""
        return cls.box([(lo, hi)], grid_size=grid_size)

    @classmethod
    def box(cls, bounds: Any, *, grid_size: int = 21) -> Region:
        """C = ∏_j [lo_j, hi_j] ⊂ ℝ^d on a product grid with ``grid_size`` points per axis."""
        b = _check_bounds(bounds)
        g = check_sample_size("grid_size", grid_size)
        if g < 2:
            raise InvalidParameterError(f"Invalid grid_size: {grid_size}; need >= 2 points.")
        _check_region_points(g ** len(b), f"grid_size^d = {g}^{len(b)}")
        axes = [np.linspace(lo, hi, g) for lo, hi in b]
        mesh = np.meshgrid(*axes, indexing="ij")
        pts = np.stack([m.ravel() for m in mesh], axis=1)
        lo_arr = np.array([lo for lo, _ in b])
        hi_arr = np.array([hi for _, hi in b])
        edge = np.any((pts == lo_arr) | (pts == hi_arr), axis=1)
        if len(b) == 1:
            pts = pts[:, 0]
        return cls("continuous", pts, edge, b)

    @classmethod
    def integers(cls, points: Any) -> Region:
        """C = a finite set of integers: ``(lo, hi)`` (both included) or an explicit array."""
        if isinstance(points, tuple) and len(points) == 2:
            lo, hi = points
            if not all(isinstance(v, (int, np.integer)) for v in (lo, hi)) or lo > hi:
                raise InvalidParameterError(
                    f"Invalid region: {points!r}; a discrete region is (lo, hi) integers, lo <= hi."
                )
            _check_region_points(int(hi) - int(lo) + 1, f"{{{int(lo)}, ..., {int(hi)}}}")
            pts = np.arange(int(lo), int(hi) + 1, dtype=np.int64)
        else:
            arr = np.asarray(points)
            if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
                raise InvalidParameterError(
                    f"Invalid region: {points!r}; a discrete region is a non-empty 1-D integer "
                    "array or (lo, hi)."
                )
            pts = np.unique(arr).astype(np.int64)
        edge = (pts == pts[0]) | (pts == pts[-1])
        return cls("discrete", pts, edge, ((float(pts[0]), float(pts[-1])),))

    def contains(self, samples: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
        """Which draws fall in C (discrete: in the set; continuous: in the bounding box)."""
        if self.kind == "discrete":
            return np.isin(samples, self.points)
        x = samples[:, None] if samples.ndim == 1 else samples
        lo = np.array([a for a, _ in self.bounds])
        hi = np.array([b for _, b in self.bounds])
        return np.all((x >= lo) & (x <= hi), axis=1)

    def point(self, index: int) -> int | float | tuple[float, ...]:
        """The evaluation point ``index`` as a Python number (or tuple for d > 1)."""
        p = self.points[index]
        if self.kind == "discrete":
            return int(p)
        if np.ndim(p) == 0:
            return float(p)
        return tuple(float(v) for v in p)

    def describe(self) -> str:
        """C in words, for error messages."""
        if self.kind == "discrete":
            return f"{{{int(self.points[0])}, ..., {int(self.points[-1])}}} ({self.points.size} points)"
        return " x ".join(f"[{lo:g}, {hi:g}]" for lo, hi in self.bounds)


def _check_bounds(bounds: Any) -> tuple[tuple[float, float], ...]:
    try:
        b = tuple((float(lo), float(hi)) for lo, hi in bounds)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"Invalid region: {bounds!r}; give (lo, hi) pairs, one per dimension."
        ) from None
    if not b or any(not (math.isfinite(lo) and math.isfinite(hi) and lo < hi) for lo, hi in b):
        raise InvalidParameterError(
            f"Invalid region: {bounds!r}; C must be bounded, closed, with lo < hi on every axis."
        )
    return b


def as_region(
    region: Any, kind: OutputKind, dim: int = 1, *, grid_size: int | None = None
) -> Region:
    """Coerce ``region`` to a :class:`Region` for outputs of ``kind`` and ``dim``.

    Accepts a :class:`Region`, ``(lo, hi)`` (an interval; integers for discrete outputs), a list of
    ``(lo, hi)`` for d > 1, or an integer array (discrete).
    """
    kind = check_kind(kind)
    if isinstance(region, Region):
        out = region
    elif kind == "discrete":
        out = Region.integers(region)
    elif dim == 1:
        try:
            lo, hi = region
        except (TypeError, ValueError):
            raise InvalidParameterError(
                f"Invalid region: {region!r}; a 1-D continuous region is (lo, hi)."
            ) from None
        out = Region.interval(lo, hi, grid_size=grid_size or DEFAULT_GRID)
    else:
        out = Region.box(region, grid_size=grid_size or 21)
    if out.kind != kind or out.dim != dim:
        raise InvalidParameterError(
            f"Invalid region: a {out.kind} region of dimension {out.dim} for {kind} outputs of "
            f"dimension {dim}."
        )
    return out


@dataclass(frozen=True, eq=False)
class DPLResult:
    """Outcome of DPL for one pair (x, x′).

    ``loss``, ``f_x``, ``f_x_prime``: the curves ℓ̂, f̂_x ∨ τ, f̂_x′ ∨ τ at ``region.points``;
    ``eps_hat = loss[t_index]``; ``bandwidths`` = (h, h′) for continuous outputs, else None;
    ``floor_driven``: f̂_x(t̂) or f̂_x′(t̂) sits at the floor τ (the estimate is then a statement about
    τ, not about the mechanism); ``edge``: t̂ on the edge of C (the supremum may lie outside C).
    """

    eps_hat: float
    t_hat: int | float | tuple[float, ...]
    t_index: int
    region: Region
    loss: npt.NDArray[np.float64]
    f_x: npt.NDArray[np.float64]
    f_x_prime: npt.NDArray[np.float64]
    tau: float
    n: int
    bandwidths: tuple[float, float] | None
    floor_driven: bool
    edge: bool


def dpl_from_samples(
    samples_x: npt.ArrayLike,
    samples_x_prime: npt.ArrayLike,
    region: Any,
    *,
    kind: OutputKind,
    tau: float = DEFAULT_TAU,
    bandwidths: tuple[float, float] | None = None,
    method: str = "auto",
) -> DPLResult:
    """DPL on given draws X ~ A(x), Y ~ A(x′) (lines 4–16 of Algorithm 3).

    ``bandwidths``: (h, h′) for continuous outputs; default :func:`silverman_bandwidth` of each
    sample. ``method``: KDE evaluation, ``"exact"``, ``"binned"`` or ``"auto"`` (binned for d = 1).
    Raises if C holds none of the draws of either sample (C outside the support).
    """
    kind = check_kind(kind)
    tau = check_tau(tau)
    x, y, dim = check_sample_pair(samples_x, samples_x_prime, kind)
    reg = as_region(region, kind, dim)
    if not (reg.contains(x).any() or reg.contains(y).any()):
        raise InvalidParameterError(
            f"Invalid region: C = {reg.describe()} holds none of the {x.shape[0]} + {y.shape[0]} "
            "draws; it lies outside the support of both outputs."
        )
    hs: tuple[float, float] | None
    if kind == "discrete":
        fx, cx = tdde(x, reg.points, tau)
        fy, cy = tdde(y, reg.points, tau)
        raw_x, raw_y = cx / x.shape[0], cy / y.shape[0]
        hs = None
    else:
        if bandwidths is None:
            hs = (silverman_bandwidth(x), silverman_bandwidth(y))
        else:
            hs = (check_bandwidth(bandwidths[0], "h"), check_bandwidth(bandwidths[1], "h_prime"))
        m = method
        if m == "auto":
            m = "binned" if dim == 1 else "exact"
        fx, raw_x = tkde(x, reg.points, hs[0], tau, method=m)
        fy, raw_y = tkde(y, reg.points, hs[1], tau, method=m)
    with np.errstate(divide="ignore", invalid="ignore"):  # τ = 0: ln 0 = −∞, and ∞ − ∞ := 0
        lx, ly = np.log(fx), np.log(fy)
        loss = np.where(lx == ly, 0.0, np.abs(lx - ly))
    i = int(np.argmax(loss))
    return DPLResult(
        eps_hat=float(loss[i]),
        t_hat=reg.point(i),
        t_index=i,
        region=reg,
        loss=loss,
        f_x=fx,
        f_x_prime=fy,
        tau=tau,
        n=int(x.shape[0]),
        bandwidths=hs,
        floor_driven=bool(raw_x[i] <= tau or raw_y[i] <= tau),
        edge=bool(reg.edge[i]),
    )


def dpl(
    mechanism: MechanismUnderTest,
    x: Any,
    x_prime: Any,
    *,
    n: int,
    region: Any,
    rng: np.random.Generator,
    tau: float = DEFAULT_TAU,
    bandwidths: tuple[float, float] | None = None,
    method: str = "auto",
) -> DPLResult:
    """Algorithm 3: draw n outputs at x and at x′, estimate ε_{x,x′,C} and locate t̂."""
    n = check_sample_size("n", n)
    check_rng(rng)
    reg = as_region(region, mechanism.kind, mechanism.dim)
    sx = mechanism.sample(x, n, rng)
    sy = mechanism.sample(x_prime, n, rng)
    return dpl_from_samples(
        sx, sy, reg, kind=mechanism.kind, tau=tau, bandwidths=bandwidths, method=method
    )
