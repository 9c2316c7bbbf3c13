"""Census releases of histogram databases under MPL: TopDown, ADPC and RDPC counts under D vs D′.

References, independent of the code under test:

* TopDown (no exact loss): the discrete Gaussian components a move shifts, derived by hand for the
  4-block state (a move inside a county shifts the two block counts; across counties also the two
  county counts); MPL's LB at a fixed seed must not exceed the pointwise bound implied by the
  certified ε(δ) of those measurements (post-processing cannot increase loss) at the Clopper–Pearson
  lower bound (level 1e-6) of the probability of t̂; power: the accounting of a release claiming
  16× the noise is exceeded by the same LB.
* ADPC: the pmf of the sum of P two-sided geometrics by direct summation of the closed form
  P(k) = (1 − α)/(1 + α)·α^{|k|}, α = e^{−ε/P} (Flaxman 2019 §2.2); far in the tails the loss tends
  to ε (composition of P runs at ε/P).
* RDPC: ε-DP by the composition of its J + 1 levels at ε/(J + 1) (Flaxman 2019 §2.2).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from auditlib.accounting import DiscreteGaussianComposition
from auditlib.exceptions import InvalidParameterError
from auditlib.mpl import mpl
from auditlib.mpl.census_hist import (
    POINTWISE_DELTAS,
    adpc_count,
    histogram_database,
    rdpc_count,
    topdown_count,
)
from auditlib.simulate.neighbours_hist import HistogramDatabase
from tests.unit._mpl import mpl_of

N, N_CONF = 5_000, 12_500


def _p_min(counts: tuple[int, ...], n: int) -> float:
    k = min(counts)
    return float(stats.beta.ppf(1e-6, k, n - k + 1))


def test_topdown_components_by_hand() -> None:
    e = topdown_count()  # blocks (3, 1, 2, 4); counties {0, 1}, {2, 3}; σ² = 1, 2, 4
    assert len(e.pairs) == 3  # moves into block 0 from blocks 1, 2, 3
    assert e.components == (((4.0, 2),), ((2.0, 2), (4.0, 2)), ((2.0, 2), (4.0, 2)))
    for d, dp in e.pairs:
        assert d.histograms.sum() == dp.histograms.sum()  # the state total is kept
        assert dp.histograms[0, 0] == d.histograms[0, 0] + 1
    assert e.region.points.tolist() == list(range(0, 7))
    # ε of the worst pair: ρ = 2/(2·2) + 2/(2·4) = 0.75; the bound is at least the δ → 0 limit
    eps = DiscreteGaussianComposition([(2.0, 2), (4.0, 2)]).epsilon(1e-6).upper
    assert e.epsilon_of_delta(1e-6) == pytest.approx(float(eps))


def test_topdown_mpl_lower_bound_under_the_accounting() -> None:
    e = topdown_count()
    r = mpl_of(e, N, N_CONF, seed=1)
    assert r.confidence.counts is not None
    p_min = _p_min(tuple(r.confidence.counts), N_CONF)
    bound = e.pointwise_bound(p_min)
    assert 0.5 < r.lb <= bound  # a real loss is detected, within what the measurements allow
    # power: the accounting of a release that claims 16× the noise is exceeded
    accs = [DiscreteGaussianComposition([(16 * s, c) for s, c in comp]) for comp in e.components]
    claimed = min(
        max(float(a.epsilon(d).upper) for a in accs) + math.log1p(d / p_min)
        for d in POINTWISE_DELTAS
    )
    assert r.lb > claimed


def test_topdown_county_count_under_the_accounting() -> None:
    e = topdown_count(level="County", unit=0)  # moves into county 0 from blocks 2 and 3
    assert e.components == (((2.0, 2), (4.0, 2)), ((2.0, 2), (4.0, 2)))
    assert e.region.points.tolist() == list(range(1, 8))  # county 0 holds 4 people
    r = mpl_of(e, N, N_CONF, seed=5)
    assert r.confidence.counts is not None
    assert 0 < r.lb <= e.pointwise_bound(_p_min(tuple(r.confidence.counts), N_CONF))


def _sum_pmf(eps: float, p: int, s: np.ndarray) -> np.ndarray:
    a = math.exp(-eps / p)
    k = np.arange(-3000, 3001)
    one = (1 - a) / (1 + a) * a ** np.abs(k).astype(np.float64)
    out = {0: one}
    cur = one
    for _ in range(p - 1):  # direct sums over the previous law
        nxt = np.zeros(cur.size + k.size - 1)
        for j, w in enumerate(one):
            if w > 1e-300:
                nxt[j : j + cur.size] += w * cur
        cur = nxt
    out[p] = cur
    off = (cur.size - 1) // 2
    return cur[s + off]


def test_adpc_exact_law_and_mpl() -> None:
    eps, p = 1.0, 2
    e = adpc_count(eps, n_runs=p, radius=3)
    t = e.region.points
    c = 3  # block 0 of the default database
    assert t.tolist() == list(range(p * (c - 3), p * (c + 3) + 1))
    ref_d = _sum_pmf(eps, p, t - p * c)
    (a, b) = e.pairs[0]  # add: c -> c + 1
    ref = np.abs(np.log(ref_d) - np.log(_sum_pmf(eps, p, t - p * (c + 1))))
    np.testing.assert_allclose(e.loss(a, b, t), ref, rtol=1e-9)
    assert e.epsilon_c < eps and e.epsilon == eps
    far = np.array([p * (c + 40)])
    assert e.loss(a, b, far)[0] == pytest.approx(eps, abs=0.05)  # the tails approach ε
    # the sampler runs ADPC: frequencies of P·released against the exact pmf
    x = e.mechanism.sample(a, 100_000, np.random.default_rng(4))
    freq = np.array([np.mean(x == v) for v in t])
    assert np.all(np.abs(freq - ref_d) <= 5 * np.sqrt(ref_d * (1 - ref_d) / 1e5))
    # coverage at fixed seeds (asymptotic, level 0.95), with power against the claim ε/2
    lbs = np.array(
        [
            mpl(e.mechanism, e.pairs, n=N, n_confidence=N_CONF, region=e.region, rng=g).lb
            for g in map(np.random.default_rng, np.random.SeedSequence(7).spawn(10))
        ]
    )
    assert np.sum(lbs > e.epsilon_c) <= 2
    half = adpc_count(eps / 2, n_runs=p, radius=3)
    assert np.sum(lbs > half.epsilon_c) >= 8


def test_rdpc_bounded_by_epsilon() -> None:
    e = rdpc_count(1.0, level="County", unit=1)  # county 1: blocks 2, 3 (6 people)
    assert e.region.points.tolist() == list(range(3, 10))
    assert e.pointwise_bound(1e-3) == pytest.approx(1.0, abs=1e-12)
    r = mpl_of(e, 1_000, 2_000, seed=3)
    assert r.lb <= 1.0
    x = e.mechanism.sample(e.pairs[0][0], 200, np.random.default_rng(0))
    assert abs(x.mean() - 6) < 5 * x.std() / math.sqrt(200)


def test_bad_inputs() -> None:
    d = histogram_database()
    two = HistogramDatabase(d.schema, d.levels, (np.array([0, 1]), d.parents[1]), d.histograms, 2)
    with pytest.raises(InvalidParameterError, match="2 top units"):
        topdown_count(db=two)
    with pytest.raises(InvalidParameterError, match="no block outside the unit"):
        topdown_count(db=histogram_database((3, 0, 0, 0)))
    with pytest.raises(InvalidParameterError, match="Invalid n_runs: 0"):
        adpc_count(1.0, n_runs=0)
    with pytest.raises(InvalidParameterError, match="Invalid unit 7"):
        adpc_count(1.0, unit=7)
    e = adpc_count(1.0)
    with pytest.raises(InvalidParameterError, match="runs on a HistogramDatabase"):
        e.mechanism.sample(3, 10, np.random.default_rng(0))
