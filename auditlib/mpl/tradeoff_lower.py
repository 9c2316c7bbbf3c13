"""Empirical f-DP: points certified to lie on or above the true trade-off curve, from samples alone.

For neighbouring inputs D, D′ with output laws P = A(D), Q = A(D′) the trade-off curve
T(P, Q)(α) is the lowest type II error β of any test of P against Q at type I error α (a test φ
rejects "the draw came from P"; α_φ = E_P[φ], β_φ = 1 − E_Q[φ]). A mechanism is f-DP when
T ≥ f for every neighbouring pair, so an auditor who wants to show that a mechanism is *less*
private than claimed needs points (α, β) with T(α) ≤ β: an *upper* bound on the curve is a
*lower* bound on the privacy loss. That is what this module gives:

1. **Select** (``n_select`` draws per input): a score s(t) ≈ ln q(t)/p(t) — relative frequencies
   with an added half count (discrete outputs) or the ratio of two Gaussian KDEs with a common
   Silverman bandwidth on a 512-point grid, interpolated (1-D continuous outputs) — and K
   thresholds c_k, quantiles of the score at log-spaced levels under both inputs. Test k rejects P
   when s(t) > c_k (a likelihood-ratio threshold test of the estimated ratio).
2. **Certify** (``n`` fresh draws per input, never seen in step 1): count the fresh draws with
   s > c_k under P (type I errors) and with s ≤ c_k under Q (type II errors) and bound each true
   error from above, simultaneously over the 2K bounds:

   * ``band="clopper-pearson"`` — one-sided Clopper–Pearson at level (1 − conf)/(2K) each
     (Bonferroni);
   * ``band="dkw"`` — the one-sided Dvoretzky–Kiefer–Wolfowitz–Massart band of each empirical
     distribution of the score, ``+ sqrt(ln(2/(1 − conf)) / (2n))``, valid for all thresholds at
     once (not only the K used);
   * ``band="mixture"`` — the beta-binomial mixture confidence sequence per count at
     (1 − conf)/(2K) (:mod:`~auditlib.mpl.confseq`): wider at a fixed n, but valid at every n at
     once (the sequential mode's anytime-valid choice).

Which way it errs. Each test is fixed before the fresh draws are seen, so its true errors
(α_k, β_k) satisfy T(α_k) ≤ β_k (T is the infimum over tests), and with probability ≥ conf
every certified point has α_u,k ≥ α_k and β_u,k ≥ β_k; T is non-increasing, so then
T(α_u,k) ≤ T(α_k) ≤ β_k ≤ β_u,k for all k at once. The points err *high* (above the curve, the
safe side for an auditor): a poor score only moves them further up, never below T. T is also
convex, so the lower convex hull of the points and (0, 1), (1, 0) (:meth:`TradeoffPoints.curve`)
lies on or above T on all of [0, 1] on the same event. The derived privacy bounds
(:meth:`TradeoffPoints.epsilon_lower`, :meth:`TradeoffPoints.mu_lower`) err *low*: they are lower
confidence bounds (level conf) on the ε(δ) and μ the pair (D, D′) needs, hence on the mechanism's.
The black-box limit applies: mass ≪ 1/n is unseen, so a test can certify α no smaller than about
ln(2K/(1 − conf))/n.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms.base import check_rng
from auditlib.mpl.density import silverman_bandwidth, tkde_binned
from auditlib.mpl.protocol import MechanismUnderTest, OutputKind, check_kind, check_sample_size
from auditlib.mpl.rates import Band, check_band, error_bounds
from auditlib.mpl.tradeoff_geometry import check_delta, hull_curve, implied_epsilon, implied_mu

FloatArray = npt.NDArray[np.float64]
Score = Callable[[npt.NDArray[Any]], FloatArray]

#: Default number of threshold tests (half placed by quantiles under P, half under Q).
DEFAULT_TESTS = 32
#: Most tests allowed: the Bonferroni share (1 − conf)/(2K) and the cost stay reasonable.
MAX_TESTS = 1024
#: The rarest error a test aims at is this many expected events among the fresh draws.
MIN_EVENTS = 30.0
_GRID = 512  # points of the continuous score's grid
_FLOOR = 1e-12  # relative floor of the KDEs on the grid (keeps ln finite far out)


def check_conf(conf: object) -> float:
    """Return the confidence level as a float in (0, 1), or raise naming it."""
    try:
        c = float(conf)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameterError(f"Invalid conf: {conf!r} is not a number.") from None
    if not 0.0 < c < 1.0:
        raise InvalidParameterError(
            f"Invalid conf: {conf!r}; a confidence level lies in (0, 1), e.g. 0.95."
        )
    return c


def check_tests(tests: object) -> int:
    """Return the number of threshold tests as an int in ``1..MAX_TESTS``, or raise."""
    if isinstance(tests, bool) or not isinstance(tests, int | np.integer):
        raise InvalidParameterError(f"Invalid tests: {tests!r}; an integer in 1..{MAX_TESTS}.")
    if not 1 <= int(tests) <= MAX_TESTS:
        raise InvalidParameterError(f"Invalid tests: {tests!r}; allowed 1..{MAX_TESTS}.")
    return int(tests)


def _one_d(samples: npt.ArrayLike, kind: OutputKind, name: str) -> npt.NDArray[Any]:
    arr = np.asarray(samples)
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidParameterError(
            f"Invalid {name}: shape {arr.shape}; the trade-off curve takes a non-empty (n,) "
            "array of discrete or one-dimensional continuous outputs."
        )
    if kind == "discrete" and not np.issubdtype(arr.dtype, np.integer):
        raise InvalidParameterError(
            f"Invalid {name}: dtype {arr.dtype}; discrete outputs are ints."
        )
    if kind == "continuous":
        arr = arr.astype(np.float64, copy=False)
        if not np.all(np.isfinite(arr)):
            raise InvalidParameterError(f"Invalid {name}: non-finite values; outputs are finite.")
    return arr


# -- step 1: the score and the thresholds -------------------------------------------------------


def discrete_score(sel_x: npt.ArrayLike, sel_y: npt.ArrayLike) -> Score:
    """s(t) = ln((c_Q(t) + ½)/(m_Q + ½)) − ln((c_P(t) + ½)/(m_P + ½)) on the values seen in the
    selection draws, 0 elsewhere (a value seen in neither sample is a tie: no evidence)."""
    x, y = np.asarray(sel_x), np.asarray(sel_y)
    values = np.unique(np.concatenate([x, y]))
    cx = np.bincount(np.searchsorted(values, x), minlength=values.size)
    cy = np.bincount(np.searchsorted(values, y), minlength=values.size)
    table = np.log((cy + 0.5) / (y.size + 0.5)) - np.log((cx + 0.5) / (x.size + 0.5))

    def score(t: npt.NDArray[Any]) -> FloatArray:
        tt = np.asarray(t)
        i = np.minimum(np.searchsorted(values, tt), values.size - 1)
        return np.where(values[i] == tt, table[i], 0.0)

    return score


def continuous_score(sel_x: npt.ArrayLike, sel_y: npt.ArrayLike) -> Score:
    """s(t) = ln f̂_Q(t) − ln f̂_P(t): Gaussian KDEs with one Silverman bandwidth (the pooled
    sample's) on a 512-point grid over the pooled range ± 3h, floored at 1e-12 of their largest
    value, linearly interpolated (constant beyond the grid)."""
    x = np.asarray(sel_x, dtype=np.float64)
    y = np.asarray(sel_y, dtype=np.float64)
    pooled = np.concatenate([x, y])
    h = silverman_bandwidth(pooled)
    grid = np.linspace(pooled.min() - 3.0 * h, pooled.max() + 3.0 * h, _GRID)
    fx = tkde_binned(x, grid, h)
    fy = tkde_binned(y, grid, h)
    floor = _FLOOR * max(float(fx.max()), float(fy.max()))
    s_grid = np.log(np.maximum(fy, floor)) - np.log(np.maximum(fx, floor))

    def score(t: npt.NDArray[Any]) -> FloatArray:
        return np.asarray(np.interp(np.asarray(t, dtype=np.float64), grid, s_grid))

    return score


def thresholds(
    score_x: FloatArray, score_y: FloatArray, tests: int, *, min_level: float = 0.0
) -> FloatArray:
    """K thresholds from the selection scores: quantiles of s under P at upper levels and under Q
    at lower levels, both log-spaced from max(1/m, ``min_level``) to ½ (so type I and type II
    errors from about there to ½ are tried), snapped to observed scores; duplicates dropped
    (ties: fewer tests). ``min_level``: errors much below a few over the fresh sample size cannot
    be certified usefully, so tests aimed there are wasted."""
    k = check_tests(tests)
    half_p = (k + 1) // 2
    half_q = k - half_p

    def levels(m: int, count: int) -> FloatArray:
        if count == 0:
            return np.empty(0)
        return np.geomspace(min(0.5, max(1.0 / m, min_level)), 0.5, count)

    cuts_p = np.quantile(score_x, 1.0 - levels(score_x.size, half_p), method="lower")
    cuts_q = np.quantile(score_y, levels(score_y.size, half_q), method="lower")
    return np.unique(np.concatenate([cuts_p, cuts_q]))


# -- step 2: certified points -------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class TradeoffPoints:
    """K certified points above T(P, Q), P = A(x), Q = A(x′), from K threshold tests.

    Test k rejects P when the score exceeds ``thresholds[k]``; ``alpha_hat``/``beta_hat`` are its
    errors on the ``n`` fresh draws (plug-in: either side of T), ``alpha_upper``/``beta_upper`` the
    certified ones (err high: with probability ≥ ``conf`` every point has β_u ≥ T(α_u)).
    ``k_alpha``/``k_beta`` are the fresh counts (type I errors among the draws at x, type II among
    those at x′).
    """

    thresholds: FloatArray
    alpha_hat: FloatArray
    beta_hat: FloatArray
    alpha_upper: FloatArray
    beta_upper: FloatArray
    k_alpha: npt.NDArray[np.int64]
    k_beta: npt.NDArray[np.int64]
    conf: float
    band: Band
    kind: OutputKind
    n_select: int
    n: int

    @property
    def tests(self) -> int:
        """K, the number of threshold tests certified at once."""
        return int(self.thresholds.size)

    def epsilon_lower(self, delta: float = 0.0) -> float:
        """Lower confidence bound (level ``conf``, errs low) on the ε of (ε, δ)-DP: the largest
        ε the points rule out, max_k max(ln((1 − δ − β_u)/α_u), ln((1 − δ − α_u)/β_u), 0)."""
        d = check_delta(delta)
        return float(np.max(implied_epsilon(self.alpha_upper, self.beta_upper, d)))

    def mu_lower(self) -> float:
        """Lower confidence bound (level ``conf``, errs low) on μ of μ-GDP: the smallest μ whose
        G_μ lies on or below every point, max_k (Φ⁻¹(1 − α_u) − Φ⁻¹(β_u)), at least 0."""
        return float(max(0.0, float(np.max(implied_mu(self.alpha_upper, self.beta_upper)))))

    def curve(self, alpha: npt.ArrayLike) -> FloatArray:
        """The certified upper curve at ``alpha``: the lower convex hull of the points (errs high:
        ≥ T(α) for all α at once, with probability ≥ ``conf``)."""
        return hull_curve(self.alpha_upper, self.beta_upper, alpha)

    def covers(self, truth: Callable[[FloatArray], Any]) -> bool:
        """Whether every certified point lies on or above the curve ``truth`` (vectorized)."""
        t = np.asarray(truth(self.alpha_upper), dtype=np.float64)
        return bool(np.all(self.beta_upper >= t))

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary: the points, counts, level and the derived bounds."""
        return {
            "conf": self.conf,
            "band": self.band,
            "kind": self.kind,
            "n_select": self.n_select,
            "n": self.n,
            "thresholds": self.thresholds.tolist(),
            "alpha_hat": self.alpha_hat.tolist(),
            "beta_hat": self.beta_hat.tolist(),
            "alpha_upper": self.alpha_upper.tolist(),
            "beta_upper": self.beta_upper.tolist(),
            "mu_lower": self.mu_lower(),
            "epsilon_lower": self.epsilon_lower(0.0),
        }


def select_tests(
    sel_x: npt.ArrayLike,
    sel_y: npt.ArrayLike,
    *,
    kind: OutputKind,
    tests: int = DEFAULT_TESTS,
    fresh: int | None = None,
) -> tuple[Score, FloatArray]:
    """Step 1: the score and the K thresholds from the selection draws at x and x′; ``fresh``
    (the fresh sample size to come) sets the smallest error aimed at, :data:`MIN_EVENTS`/fresh."""
    kind = check_kind(kind)
    x = _one_d(sel_x, kind, "sel_x")
    y = _one_d(sel_y, kind, "sel_y")
    score = discrete_score(x, y) if kind == "discrete" else continuous_score(x, y)
    low = 0.0 if fresh is None else MIN_EVENTS / fresh
    return score, thresholds(score(x), score(y), tests, min_level=low)


def count_errors(
    score: Score, cuts: FloatArray, fresh_x: npt.ArrayLike, fresh_y: npt.ArrayLike
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per threshold: type I errors (fresh draws at x with s > c) and type II errors (draws at x′
    with s ≤ c), by sorting the scores once."""
    sx = np.sort(score(np.asarray(fresh_x)))
    sy = np.sort(score(np.asarray(fresh_y)))
    k_a = sx.size - np.searchsorted(sx, cuts, side="right")
    k_b = np.searchsorted(sy, cuts, side="right")
    return k_a.astype(np.int64), k_b.astype(np.int64)


def certify(
    score: Score,
    cuts: FloatArray,
    fresh_x: npt.ArrayLike,
    fresh_y: npt.ArrayLike,
    *,
    kind: OutputKind,
    conf: float = 0.95,
    band: Band = "clopper-pearson",
    n_select: int = 0,
) -> TradeoffPoints:
    """Step 2: certified points of the fixed tests (score, cuts) from fresh draws (equal sizes)."""
    kind = check_kind(kind)
    conf = check_conf(conf)
    band = check_band(band)
    x = _one_d(fresh_x, kind, "fresh_x")
    y = _one_d(fresh_y, kind, "fresh_y")
    if x.size != y.size:
        raise InvalidParameterError(
            f"Invalid fresh_y: {y.size} draws where fresh_x has {x.size}; use n draws at each."
        )
    n = int(x.size)
    k_a, k_b = count_errors(score, cuts, x, y)
    risk = (1.0 - conf) / 2.0  # half for the type I bounds, half for the type II bounds
    return TradeoffPoints(
        thresholds=np.asarray(cuts, dtype=np.float64),
        alpha_hat=k_a / n,
        beta_hat=k_b / n,
        alpha_upper=error_bounds(k_a, n, risk, band),
        beta_upper=error_bounds(k_b, n, risk, band),
        k_alpha=k_a,
        k_beta=k_b,
        conf=conf,
        band=band,
        kind=kind,
        n_select=n_select,
        n=n,
    )


def tradeoff_from_samples(
    sel_x: npt.ArrayLike,
    sel_y: npt.ArrayLike,
    fresh_x: npt.ArrayLike,
    fresh_y: npt.ArrayLike,
    *,
    kind: OutputKind,
    conf: float = 0.95,
    band: Band = "clopper-pearson",
    tests: int = DEFAULT_TESTS,
) -> TradeoffPoints:
    """Both steps on given draws: selection draws pick the tests, fresh draws certify them."""
    score, cuts = select_tests(sel_x, sel_y, kind=kind, tests=tests, fresh=np.size(fresh_x))
    return certify(
        score, cuts, fresh_x, fresh_y, kind=kind, conf=conf, band=band, n_select=np.size(sel_x)
    )


def tradeoff_lower(
    mechanism: MechanismUnderTest,
    x: Any,
    x_prime: Any,
    *,
    n_select: int,
    n: int,
    rng: np.random.Generator,
    conf: float = 0.95,
    band: Band = "clopper-pearson",
    tests: int = DEFAULT_TESTS,
) -> TradeoffPoints:
    """Certified points above T(A(x), A(x′)) from ``n_select`` + ``n`` draws at each input.

    >>> from auditlib.mpl.tradeoff_catalogue import gaussian_shift
    >>> g = gaussian_shift(1.0)
    >>> pts = tradeoff_lower(g.mechanism, g.x, g.x_prime, n_select=10_000, n=50_000,
    ...                      rng=np.random.default_rng(3))
    >>> pts.covers(g.curve), 0.5 < pts.mu_lower() <= 1.0
    (True, True)
    """
    if mechanism.dim != 1:
        raise InvalidParameterError(
            f"Invalid mechanism {mechanism.name!r}: dimension {mechanism.dim}; the trade-off "
            "curve takes discrete or one-dimensional continuous outputs."
        )
    m = check_sample_size("n_select", n_select)
    big_n = check_sample_size("n", n)
    check_conf(conf)
    check_band(band)
    check_tests(tests)
    check_rng(rng)
    sx = mechanism.sample(x, m, rng)
    sy = mechanism.sample(x_prime, m, rng)
    fx = mechanism.sample(x, big_n, rng)
    fy = mechanism.sample(x_prime, big_n, rng)
    return tradeoff_from_samples(
        sx, sy, fx, fy, kind=mechanism.kind, conf=conf, band=band, tests=tests
    )
