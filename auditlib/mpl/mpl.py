"""Maximum privacy loss, Algorithm 4 (MPL) of Askin, Kutta & Dette: a one-sided confidence bound [LB, ∞).

1. DPL (Algorithm 3) on each of the B pairs with n draws per input; pick the pair with the largest
   ε̂ and its location t̂.
2. Fresh N draws at x_max and x′_max; estimate both densities at t̂ only and set

       LB = ℓ̂*(t̂) + Φ⁻¹(α) · σ̂_N / c_N          (eq. (26))

   with, for discrete outputs, σ̂² = 1/f̂_x(t̂) + 1/f̂_x′(t̂) − 2 and c_N = √N, and for continuous
   outputs σ̂² = ∫K² · (1/f̂_x(t̂) + 1/f̂_x′(t̂)) and c_N = √(N h^d) with the undersmoothed
   bandwidth h of condition (C4).

Which way it errs: LB is an *asymptotic* lower confidence bound for ε*_C = max_b ε_{x_b,x′_b,C}
(Theorem 2): P(LB ≤ ε*_C) → 1 − α as n, N → ∞. It bounds the privacy loss of the pairs and the
region tested, not the global ε (ε*_C ≤ ε). A poorly located t̂ only makes LB smaller (more
conservative); at finite n the coverage can fall below 1 − α when the densities at t̂ are small
(``floor_driven``, ``sparse_support``), because the normal approximation of ln f̂ is then poor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms.base import check_rng
from auditlib.mpl.checks import check_alpha, check_epsilons
from auditlib.mpl.density import (
    CONFIDENCE_BETA,
    CONFIDENCE_GAMMA,
    check_bandwidth,
    check_smoothing,
    check_tau,
    gaussian_kde_exact,
    kernel_square_integral,
    tdde,
    undersmoothed_bandwidth,
)
from auditlib.mpl.dpl import DEFAULT_TAU, DPLResult, Region, as_region, dpl_from_samples
from auditlib.mpl.hockey import HockeyStick, hockey_stick
from auditlib.mpl.protocol import (
    MechanismUnderTest,
    OutputKind,
    check_kind,
    check_sample_pair,
    check_sample_size,
)

SPARSE_COUNT = 20  # fewer draws than this at t̂ (discrete): the normal approximation is doubtful


def _check_positive(fx: float, fy: float, t: Any, tau: float) -> None:
    if fx <= 0.0 or fy <= 0.0:
        raise InvalidParameterError(
            f"Invalid tau: {tau!r}; a density estimate at t = {t!r} is 0 (no draws there), so "
            "the loss and its variance are undefined; use a floor tau > 0."
        )


@dataclass(frozen=True)
class ConfidenceStep:
    """The second part of MPL at a fixed t: ℓ̂*(t), σ̂, c_N and LB (lines 7–21 of Algorithm 4).

    ``f_x``/``f_x_prime`` are floored at τ; ``counts`` are the raw draws equal to t (discrete) and
    ``bandwidth`` the undersmoothed h (continuous); the other is None.
    """

    lb: float
    loss: float
    f_x: float
    f_x_prime: float
    sigma_hat: float
    c_n: float
    alpha: float
    n: int
    tau: float
    bandwidth: float | None
    counts: tuple[int, int] | None
    floor_driven: bool
    sparse_support: bool


def confidence_bound(
    samples_x: npt.ArrayLike,
    samples_x_prime: npt.ArrayLike,
    t: Any,
    *,
    kind: OutputKind,
    alpha: float = 0.05,
    tau: float = DEFAULT_TAU,
    bandwidth: float | None = None,
    beta: float = CONFIDENCE_BETA,
    gamma: float = CONFIDENCE_GAMMA,
) -> ConfidenceStep:
    """LB of eq. (26) for the pointwise loss ℓ_{x,x′}(t) from draws X* ~ A(x), Y* ~ A(x′).

    Both samples must have the same size N. ``bandwidth``: default the mean of
    :func:`undersmoothed_bandwidth` of the two samples (one h for both, as in Algorithm 4).
    """
    kind = check_kind(kind)
    alpha = check_alpha(alpha)
    tau = check_tau(tau)
    x, y, dim = check_sample_pair(samples_x, samples_x_prime, kind)
    big_n = int(x.shape[0])
    if y.shape[0] != big_n:
        raise InvalidParameterError(
            f"Invalid samples_x_prime: {y.shape[0]} draws where samples_x has {big_n}; the "
            "confidence step uses N draws at each input."
        )
    z = float(ndtri(alpha))
    h: float | None
    counts: tuple[int, int] | None
    if kind == "discrete":
        pt = np.array([int(t)], dtype=np.int64)
        fx_arr, cx = tdde(x, pt, tau)
        fy_arr, cy = tdde(y, pt, tau)
        fx, fy = float(fx_arr[0]), float(fy_arr[0])
        counts = (int(cx[0]), int(cy[0]))
        raw = (counts[0] / big_n, counts[1] / big_n)
        _check_positive(fx, fy, t, tau)
        var = 1.0 / fx + 1.0 / fy - 2.0
        c_n = math.sqrt(big_n)
        h = None
        sparse = min(counts) < SPARSE_COUNT
    else:
        pt2 = np.asarray(t, dtype=np.float64).reshape(1, dim)
        if bandwidth is None:
            h = 0.5 * (
                undersmoothed_bandwidth(x, beta=beta, gamma=gamma)
                + undersmoothed_bandwidth(y, beta=beta, gamma=gamma)
            )
        else:
            h = check_bandwidth(bandwidth)
        rx = float(gaussian_kde_exact(x, pt2, h)[0])
        ry = float(gaussian_kde_exact(y, pt2, h)[0])
        raw = (rx, ry)
        fx, fy = max(rx, tau), max(ry, tau)
        _check_positive(fx, fy, t, tau)
        var = kernel_square_integral(dim) * (1.0 / fx + 1.0 / fy)
        c_n = math.sqrt(big_n * h**dim)
        counts = None
        sparse = False
    loss = abs(math.log(fx) - math.log(fy))
    sigma = math.sqrt(max(var, 0.0))
    return ConfidenceStep(
        lb=loss + z * sigma / c_n,
        loss=loss,
        f_x=fx,
        f_x_prime=fy,
        sigma_hat=sigma,
        c_n=c_n,
        alpha=alpha,
        n=big_n,
        tau=tau,
        bandwidth=h,
        counts=counts,
        floor_driven=bool(raw[0] <= tau or raw[1] <= tau),
        sparse_support=sparse,
    )


@dataclass(frozen=True, eq=False)
class MPLResult:
    """Everything MPL computed. ``lb`` is the statistical lower bound on ε*_C (level 1 − α).

    Step 1 (DPL, n draws per input, B pairs): ``eps_hat`` (B,), ``t_hat`` (B,) locations,
    ``bandwidths`` (B, 2) array of (h, h′) (continuous) or None, ``loss_curves`` (B, m) over
    ``region.points``; ``best`` indexes the pair (x_max, x′_max) and ``t_hat_max`` its location.

    Step 2 (N fresh draws at the best pair): ``confidence`` (:class:`ConfidenceStep`) with ℓ̂*(t̂),
    f̂_x(t̂), f̂_x′(t̂), σ̂, c_N and the undersmoothed bandwidth.

    Flags: ``floor_driven`` — a density estimate at t̂ sits at τ in either step (LB then reflects τ,
    e.g. a mechanism with ε = ∞ or a region where one input never lands); ``edge`` — t̂ is on the
    edge of C (the supremum may lie beyond C: widen C); ``sparse_support`` — discrete outputs with
    fewer than ``SPARSE_COUNT`` of the N draws at t̂ in either sample.

    ``hockey_stick`` (with ``delta_epsilons``): δ(ε) of the best pair from the same draws — step 1
    locates the events, the N fresh draws estimate and bound (:mod:`auditlib.mpl.hockey`).
    """

    lb: float
    alpha: float
    kind: OutputKind
    dim: int
    n: int
    n_confidence: int
    tau: float
    region: Region
    pairs: tuple[tuple[Any, Any], ...]
    eps_hat: npt.NDArray[np.float64]
    t_hat: tuple[Any, ...]
    bandwidths: npt.NDArray[np.float64] | None
    loss_curves: npt.NDArray[np.float64]
    best: int
    t_hat_max: Any
    confidence: ConfidenceStep
    floor_driven: bool
    edge: bool
    sparse_support: bool
    hockey_stick: HockeyStick | None = None

    @property
    def loss_star(self) -> float:
        """ℓ̂*(t̂): the loss at t̂ re-estimated on the fresh draws."""
        return self.confidence.loss

    @property
    def sigma_hat(self) -> float:
        """σ̂_N of eq. (26)."""
        return self.confidence.sigma_hat

    @property
    def c_n(self) -> float:
        """c_N of eq. (26): √N (discrete) or √(N h^d) (continuous)."""
        return self.confidence.c_n

    @property
    def eps_hat_max(self) -> float:
        """max_b ε̂_b, the step-1 point estimate of ε*_C (biased up by the max over C and b)."""
        return float(self.eps_hat[self.best])

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary: every scalar, the per-pair estimates and the flags (no curves)."""
        c = self.confidence
        return {
            "lb": self.lb,
            "alpha": self.alpha,
            "kind": self.kind,
            "dim": self.dim,
            "n": self.n,
            "n_confidence": self.n_confidence,
            "tau": self.tau,
            "region": [list(b) for b in self.region.bounds],
            "region_points": int(self.region.points.shape[0]),
            "pairs": [repr(p) for p in self.pairs],
            "eps_hat": [float(v) for v in self.eps_hat],
            "t_hat": [_jsonable(t) for t in self.t_hat],
            "bandwidths": None if self.bandwidths is None else self.bandwidths.tolist(),
            "best": self.best,
            "eps_hat_max": self.eps_hat_max,
            "t_hat_max": _jsonable(self.t_hat_max),
            "loss_star": c.loss,
            "f_x": c.f_x,
            "f_x_prime": c.f_x_prime,
            "sigma_hat": c.sigma_hat,
            "c_n": c.c_n,
            "bandwidth_confidence": c.bandwidth,
            "counts": None if c.counts is None else list(c.counts),
            "floor_driven": self.floor_driven,
            "edge": self.edge,
            "sparse_support": self.sparse_support,
            **self._delta_dict(),
        }

    def _delta_dict(self) -> dict[str, Any]:
        h = self.hockey_stick
        if h is None:
            return {}
        return {
            "delta_epsilon": h.epsilon.tolist(),
            "delta_hat": h.delta_hat.tolist(),
            "delta_lb": h.delta_lb.tolist(),
        }

    def to_dataset(self) -> Any:
        """The result as an ``xarray.Dataset``: loss curves (pair × point), ε̂ and t̂ per pair,
        the region's points as coordinates (``t`` for d = 1, ``t_0..t_{d−1}`` otherwise) and the
        scalars of :meth:`to_dict` as attributes (lists and None as JSON strings)."""
        import json

        import xarray as xr

        pts = self.region.points
        coords: dict[str, Any] = {"pair": np.arange(len(self.pairs))}
        if pts.ndim == 1:
            coords["t"] = ("point", pts)
        else:
            for j in range(pts.shape[1]):
                coords[f"t_{j}"] = ("point", pts[:, j])
        data: dict[str, Any] = {
            "loss": (("pair", "point"), self.loss_curves),
            "eps_hat": ("pair", self.eps_hat),
            "t_hat_index": ("pair", np.array([_index_of(pts, t) for t in self.t_hat])),
        }
        if self.hockey_stick is not None:
            coords["delta_epsilon"] = self.hockey_stick.epsilon
            data["delta_hat"] = ("delta_epsilon", self.hockey_stick.delta_hat)
            data["delta_lb"] = ("delta_epsilon", self.hockey_stick.delta_lb)
        if self.bandwidths is not None:
            data["bandwidth_x"] = ("pair", self.bandwidths[:, 0])
            data["bandwidth_x_prime"] = ("pair", self.bandwidths[:, 1])
        attrs = {
            k: (json.dumps(v) if isinstance(v, (list, dict)) or v is None else v)
            for k, v in self.to_dict().items()
            if k not in ("eps_hat", "t_hat", "bandwidths", *self._delta_dict())
        }
        attrs = {k: (int(v) if isinstance(v, bool) else v) for k, v in attrs.items()}
        return xr.Dataset(data, coords=coords, attrs=attrs)

    def summary(self) -> str:
        """One line for logs."""
        flags = [f for f in ("floor_driven", "edge", "sparse_support") if getattr(self, f)]
        return (
            f"LB = {self.lb:.4f} (alpha = {self.alpha:g}); eps_hat = {self.eps_hat_max:.4f} at "
            f"t = {self.t_hat_max} for pair {self.best}; loss* = {self.loss_star:.4f}, "
            f"sigma = {self.sigma_hat:.4f}, c_N = {self.c_n:.2f}"
            + (f"; flags: {', '.join(flags)}" if flags else "")
        )


def _jsonable(t: Any) -> Any:
    return list(t) if isinstance(t, tuple) else t


def _index_of(points: npt.NDArray[Any], t: Any) -> int:
    target = np.asarray(t)
    hit = points == target if points.ndim == 1 else np.all(points == target, axis=1)
    return int(np.flatnonzero(hit)[0])


def mpl(
    mechanism: MechanismUnderTest,
    pairs: Sequence[tuple[Any, Any]],
    *,
    n: int,
    n_confidence: int,
    region: Any,
    rng: np.random.Generator,
    alpha: float = 0.05,
    tau: float = DEFAULT_TAU,
    beta: float = CONFIDENCE_BETA,
    gamma: float = CONFIDENCE_GAMMA,
    grid_size: int | None = None,
    delta_epsilons: Sequence[float] | None = None,
) -> MPLResult:
    """Algorithm 4: lower confidence bound LB for max_b ε_{x_b,x′_b,C} from B pairs.

    ``n`` draws per input in step 1, ``n_confidence`` (the paper's N) fresh draws per input in step
    2; ``tau`` is used in both steps; ``beta``/``gamma`` set the undersmoothed bandwidth (C4).
    ``delta_epsilons``: also estimate the hockey-stick δ(ε) of the best pair on this ε grid from
    the same draws (discrete or 1-D outputs; :func:`auditlib.mpl.hockey.hockey_stick`).

    >>> from auditlib.mpl.catalogue import laplace_mechanism
    >>> e = laplace_mechanism(0.7)
    >>> r = mpl(e.mechanism, e.pairs, n=20_000, n_confidence=50_000, region=e.region,
    ...         rng=np.random.default_rng(1))
    >>> r.lb <= e.epsilon_c
    True
    """
    check_kind(mechanism.kind)
    n = check_sample_size("n", n)
    big_n = check_sample_size("n_confidence", n_confidence)
    alpha = check_alpha(alpha)
    tau = check_tau(tau)
    check_rng(rng)
    pair_list = tuple((p[0], p[1]) for p in pairs)
    if not pair_list:
        raise InvalidParameterError("Invalid pairs: empty; MPL needs at least one pair (x, x').")
    if mechanism.kind == "continuous":
        beta, gamma = check_smoothing(beta, gamma)
        if big_n > n:
            nu = math.log(big_n) / math.log(n) - 1.0 if n > 1 else math.inf
            if not gamma > nu / (6.0 * (1.0 + nu)):
                raise InvalidParameterError(
                    f"Invalid gamma: {gamma!r}; condition (C4) needs gamma > nu/(6(1+nu)) = "
                    f"{nu / (6.0 * (1.0 + nu)):.4f} for N = n^(1+nu), n = {n}, N = {big_n}."
                )
    eps_delta = None if delta_epsilons is None else check_epsilons(delta_epsilons)
    if eps_delta is not None and mechanism.dim != 1:
        raise InvalidParameterError(
            f"Invalid delta_epsilons for {mechanism.name!r}: the hockey-stick estimate takes "
            f"discrete or one-dimensional outputs, not dimension {mechanism.dim}."
        )
    reg = as_region(region, mechanism.kind, mechanism.dim, grid_size=grid_size)
    results: list[DPLResult] = []
    draws: list[tuple[npt.NDArray[Any], npt.NDArray[Any]]] = []
    for a, b in pair_list:  # Algorithm 3 per pair (the draws of `dpl`, kept for δ)
        sx = mechanism.sample(a, n, rng)
        sy = mechanism.sample(b, n, rng)
        results.append(dpl_from_samples(sx, sy, reg, kind=mechanism.kind, tau=tau))
        if eps_delta is not None:
            draws.append((sx, sy))
    eps = np.array([r.eps_hat for r in results])
    best = int(np.argmax(eps))
    t_max = results[best].t_hat
    xs = mechanism.sample(pair_list[best][0], big_n, rng)
    ys = mechanism.sample(pair_list[best][1], big_n, rng)
    conf = confidence_bound(
        xs, ys, t_max, kind=mechanism.kind, alpha=alpha, tau=tau, beta=beta, gamma=gamma
    )
    hs = None
    if eps_delta is not None:
        sx, sy = draws[best]
        hs = hockey_stick(sx, sy, xs, ys, eps_delta, kind=mechanism.kind, alpha=alpha)
    bws = None
    if mechanism.kind == "continuous":
        bws = np.array([r.bandwidths for r in results], dtype=np.float64)
    return MPLResult(
        lb=conf.lb,
        alpha=alpha,
        kind=mechanism.kind,
        dim=mechanism.dim,
        n=n,
        n_confidence=big_n,
        tau=tau,
        region=reg,
        pairs=pair_list,
        eps_hat=eps,
        t_hat=tuple(r.t_hat for r in results),
        bandwidths=bws,
        loss_curves=np.stack([r.loss for r in results]),
        best=best,
        t_hat_max=t_max,
        confidence=conf,
        floor_driven=bool(results[best].floor_driven or conf.floor_driven),
        edge=results[best].edge,
        sparse_support=conf.sparse_support,
        hockey_stick=hs,
    )


class _Entry(Protocol):
    """A mechanism under test with its pairs and region (a catalogue or census entry)."""

    @property
    def mechanism(self) -> MechanismUnderTest: ...

    @property
    def pairs(self) -> Sequence[tuple[Any, Any]]: ...

    @property
    def region(self) -> Any: ...


def mpl_known(
    entry: _Entry, n: int, n_confidence: int, rng: np.random.Generator, **options: Any
) -> MPLResult:
    """:func:`mpl` of an entry (:class:`~auditlib.mpl.catalogue.KnownMechanism`, a census
    release's) on its own pairs and region: ``n`` and ``n_confidence`` draws per input,
    ``options`` the rest of :func:`mpl`'s arguments."""
    return mpl(
        entry.mechanism,
        entry.pairs,
        n=n,
        n_confidence=n_confidence,
        region=entry.region,
        rng=rng,
        **options,
    )
