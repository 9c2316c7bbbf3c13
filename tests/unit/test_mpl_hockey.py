"""Hockey-stick δ(ε) from MPL's draws: exact values, coverage of the lower bound, power.

References (closed forms derived from the laws, not from the code under test):

* Laplace, shift with ε_pair = |s − s′|/b: δ(ε) = (1 − e^{(ε − ε_pair)/2})₊ (the privacy loss is
  ±ε_pair on the two tails and affine in between);
* two-sided geometric G(ε₀), shift 1: the loss is ±ε₀ on t ≤ 0 / t ≥ 1, so
  δ(ε) = (1 − e^{ε − ε₀})₊ / (1 + e^{−ε₀});
* randomized response with p = e^{ε₀}/(1 + e^{ε₀}): δ(ε) = (e^{ε₀} − e^ε)₊ / (1 + e^{ε₀});
* discrete Gaussian: Σ_k (f(k) − e^ε f(k − 1))₊ with f normalized by direct summation.

The lower bound is a finite-sample one (Clopper–Pearson on an event fixed by the step-1 draws), so
its coverage is held to ≥ 1 − α at every ε with binomial slack (R = 60: 3 sd ≈ 0.085).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError
from auditlib.mpl import MechanismUnderTest, geometric_count, laplace_mechanism, mpl
from auditlib.mpl.catalogue import KnownMechanism
from auditlib.mpl.census import allocation_count
from auditlib.mpl.hockey import hockey_stick, hockey_stick_exact
from tests.unit._mpl import mpl_of, mpl_runs

EPS = np.array([0.0, 0.1, 0.3, 0.5, 0.7, 1.0])


def _laplace_delta(eps: np.ndarray, eps_pair: float) -> np.ndarray:
    return np.maximum(1.0 - np.exp((eps - eps_pair) / 2.0), 0.0)


def _geometric_delta(eps: np.ndarray, eps0: float) -> np.ndarray:
    return np.maximum(1.0 - np.exp(eps - eps0), 0.0) / (1.0 + math.exp(-eps0))


def _dg_delta(eps: np.ndarray, sigma2: float) -> np.ndarray:
    k = np.arange(-400, 402, dtype=np.float64)
    w = np.exp(-(k * k) / (2 * sigma2))
    f = w / w.sum()
    g = np.exp(-((k - 1) ** 2) / (2 * sigma2)) / w.sum()
    return np.array([np.maximum(f - math.exp(e) * g, 0.0).sum() for e in eps])


def _runs(e: KnownMechanism, reps: int, seed: int, n: int = 5_000, big_n: int = 12_500):
    return mpl_runs(e, reps, seed, n, big_n, delta_epsilons=EPS)


def test_exact_divergence_against_closed_forms() -> None:
    eps0 = 0.9
    k = np.arange(-300, 302)
    a = math.exp(-eps0)
    logp = np.log((1 - a) / (1 + a)) + np.abs(k) * math.log(a)
    logq = np.log((1 - a) / (1 + a)) + np.abs(k - 1) * math.log(a)
    np.testing.assert_allclose(
        hockey_stick_exact(logp, logq, EPS), _geometric_delta(EPS, eps0), atol=1e-12
    )
    p = math.exp(eps0) / (1 + math.exp(eps0))
    rr = hockey_stick_exact(np.log([p, 1 - p]), np.log([1 - p, p]), EPS)
    ref = np.maximum(math.exp(eps0) - np.exp(EPS), 0.0) / (1 + math.exp(eps0))
    np.testing.assert_allclose(rr, ref, atol=1e-15)


def test_laplace_delta_from_samples() -> None:
    e = laplace_mechanism(0.7)
    runs = _runs(e, 60, seed=901)
    exact = np.array([_laplace_delta(EPS, 0.7 * abs(r.pairs[r.best][1])) for r in runs])
    lb = np.array([r.hockey_stick.delta_lb for r in runs])  # type: ignore[union-attr]
    hat = np.array([r.hockey_stick.delta_hat for r in runs])  # type: ignore[union-attr]
    assert np.all(np.mean(lb <= exact + 1e-12, axis=0) >= 0.95 - 0.085)
    # power: at ε = 0 and 0.1 (δ ≈ 0.27–0.30 for the chosen pairs) the bound is positive every time
    assert np.all(lb[:, :2] > 0.1)
    # the plug-in on bins of width ≈ h: close to exact, biased down by binning at most a little
    assert np.abs(np.mean(hat - exact, axis=0)).max() < 0.03


def test_geometric_and_dg_delta_from_samples() -> None:
    g = geometric_count(0.7)
    runs = _runs(g, 60, seed=902)
    exact = _geometric_delta(EPS, 0.7)  # both pairs have ε_pair = 0.7
    lb = np.array([r.hockey_stick.delta_lb for r in runs])  # type: ignore[union-attr]
    hat = np.array([r.hockey_stick.delta_hat for r in runs])  # type: ignore[union-attr]
    assert np.all(np.mean(lb <= exact + 1e-12, axis=0) >= 0.95 - 0.085)
    # the plug-in is close below ε₀ and errs up where δ vanishes (the positive part is convex)
    assert np.abs(np.mean(hat, axis=0) - exact)[:4].max() < 0.01
    assert 0 < np.mean(hat[:, 4]) < 0.03
    assert np.all(lb[:, :3] > 0)  # δ(0.3) = 0.22: found in every run
    d = allocation_count(5.0)
    runs = _runs(d, 40, seed=903)
    exact = _dg_delta(EPS, 5.0)  # every pair moves the count by ±1: same δ by symmetry
    lb = np.array([r.hockey_stick.delta_lb for r in runs])  # type: ignore[union-attr]
    hat = np.array([r.hockey_stick.delta_hat for r in runs])  # type: ignore[union-attr]
    assert np.all(np.mean(lb <= exact + 1e-12, axis=0) >= 0.95 - 0.1)
    assert np.abs(np.mean(hat, axis=0) - exact).max() < 0.01
    assert np.mean(lb[:, 1] > 0.5 * exact[1]) >= 0.9


def test_detects_a_false_delta_claim() -> None:
    # Lap(1/1.4) sold as (0.7, 0)-DP: δ(0.7) = 1 − e^{−0.35} ≈ 0.30 on the pair at distance 1
    e = laplace_mechanism(0.7, scale=1.0 / 1.4)
    runs = _runs(e, 20, seed=904)
    lb07 = np.array([r.hockey_stick.delta_lb[4] for r in runs])  # type: ignore[union-attr]
    assert np.mean(lb07 > 0.05) >= 0.9
    # a correct Laplace at ε = 0.7 gives δ_LB(0.7) = 0 (no false alarm)
    ok = _runs(laplace_mechanism(0.7), 20, seed=905)
    assert all(r.hockey_stick.delta_lb[4] == 0.0 for r in ok)  # type: ignore[union-attr]


def test_result_carries_delta() -> None:
    e = geometric_count(0.7)
    r = mpl_of(e, 2000, 4000, seed=1, delta_epsilons=[0.2, 0.5])
    d = r.to_dict()
    assert d["delta_epsilon"] == [0.2, 0.5] and len(d["delta_lb"]) == 2
    ds = r.to_dataset()
    assert ds["delta_lb"].dims == ("delta_epsilon",)
    # without delta_epsilons the same seed gives the same bound (same draws) and no δ
    r0 = mpl_of(e, 2000, 4000, seed=1)
    assert r0.lb == r.lb and r0.hockey_stick is None


def test_bad_inputs() -> None:
    e = geometric_count(0.7)
    kw = dict(n=100, n_confidence=100, region=e.region, rng=np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match=r"epsilon: -0\.1"):
        mpl(e.mechanism, e.pairs, delta_epsilons=[0.1, -0.1], **kw)  # type: ignore[arg-type]
    mech2 = MechanismUnderTest(
        "gauss2", lambda s, n, rng: rng.normal(s, 1.0, size=(n, 2)), "continuous", dim=2
    )
    with pytest.raises(InvalidParameterError, match="not dimension 2"):
        mpl(mech2, [(0.0, 1.0)], n=100, n_confidence=100, region=[(-1, 1), (-1, 1)],
            rng=np.random.default_rng(0), delta_epsilons=[0.1])  # fmt: skip
    with pytest.raises(InvalidParameterError, match="samples_x: empty"):
        hockey_stick(np.array([], dtype=np.int64), [1], [0], [1], [0.1], kind="discrete")
    with pytest.raises(InvalidParameterError, match="each pair of samples"):
        hockey_stick([0, 1], [1], [0], [1], [0.1], kind="discrete")
    with pytest.raises(InvalidParameterError, match="dtype float64 for a discrete"):
        hockey_stick([0.5], [1.0], [0.0], [1.0], [0.1], kind="discrete")
    with pytest.raises(InvalidParameterError, match="alpha: 2"):
        hockey_stick([0], [1], [0], [1], [0.1], kind="discrete", alpha=2)
    with pytest.raises(InvalidParameterError, match="epsilons"):
        hockey_stick([0], [1], [0], [1], [], kind="discrete")


def test_wide_sparse_support_gives_the_same_cells() -> None:
    # integer outputs spread over a wide range are labelled by the values seen: the same events and
    # bound; the plug-in differs only by how fresh values unseen in step 1 are pooled
    g = np.random.default_rng(5)
    a = np.exp(-0.8)
    draws = [g.geometric(1 - a, m) - g.geometric(1 - a, m) + s for m, s in
             ((3000, 0), (3000, 1), (6000, 0), (6000, 1))]  # fmt: skip
    narrow = hockey_stick(*draws, EPS, kind="discrete")
    wide = hockey_stick(*[d * 10**6 for d in draws], EPS, kind="discrete")
    np.testing.assert_array_equal(narrow.delta_lb, wide.delta_lb)
    np.testing.assert_allclose(narrow.delta_hat, wide.delta_hat, atol=1e-3)
    assert narrow.delta_lb[0] > 0
