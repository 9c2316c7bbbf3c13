"""Direct estimate (Flaxman 2019 §2.3): log-ratios of event frequencies under D and D′, against exact
laws of the geometric mechanism, and the keyed chunks against ``direct_samples``."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib.epl.direct import direct_chunk, direct_log_ratio
from auditlib.exceptions import InvalidParameterError
from auditlib.geography.flaxman import generate_population
from auditlib.mechanisms import TwoSidedGeometric
from auditlib.simulate.neighbours import direct_samples, move_between_areas

EPS = 0.5


def exact_log_ratio(k: np.ndarray, event: str) -> np.ndarray:
    """log P(G ∈ E_k)/P(G − 1 ∈ E_k) for G ~ G(ε): D′ has one person fewer in the unit."""
    g = TwoSidedGeometric(EPS)
    if event == "eq":
        return np.asarray(g.logpmf(k) - g.logpmf(k + 1))
    return np.log(g.sf(k - 1)) - np.log(g.sf(k))  # P(G ≥ k) / P(G ≥ k + 1)


@pytest.mark.parametrize("event", ["eq", "ge"])
def test_band_covers_the_exact_log_ratio_and_the_lower_bound_holds(event: str) -> None:
    cover, lower_ok = [], []
    for i in range(60):
        g = np.random.default_rng(i)
        mech = TwoSidedGeometric(EPS)
        d, dp = mech.rvs(4000, g), mech.rvs(4000, g) - 1
        est = direct_log_ratio(d, dp, event=event, min_events=20, confidence=0.9)
        truth = exact_log_ratio(est.k, event)
        cover.append((est.low <= truth) & (truth <= est.high))
        lower_ok.append(est.epl_lower <= EPS)  # ε-DP: every event's log-ratio is within ±ε
    assert 0.84 <= np.concatenate(cover).mean() <= 0.96  # nominal 90 % pointwise
    assert np.mean(lower_ok) >= 0.9  # the simultaneous lower bound holds (Bonferroni)


def test_with_many_runs_the_lower_bound_approaches_eps_and_a_wrong_eps_is_rejected() -> None:
    g = np.random.default_rng(11)
    mech = TwoSidedGeometric(EPS)
    d, dp = mech.rvs(200_000, g), mech.rvs(200_000, g) - 1
    est = direct_log_ratio(d, dp, event="ge", min_events=100)
    assert 0.85 * EPS < est.epl_lower <= EPS < est.epl < 1.15 * EPS
    # a noise 30 % less private than claimed shows above the claim
    worse = TwoSidedGeometric(1.3 * EPS)
    d2, dp2 = worse.rvs(200_000, g), worse.rvs(200_000, g) - 1
    assert direct_log_ratio(d2, dp2, event="ge", min_events=100).epl_lower > EPS


def test_chunks_reproduce_direct_samples_on_flaxman_databases() -> None:
    pop = generate_population(20_000, 2, 20, seed=3)  # C = 31
    pair = move_between_areas(pop, 0, 500)
    ref = direct_samples(pair, "rdpc", 0.5, level=2, unit=0, replicates=12, seed=9)
    e_d, e_p = ref.errors
    a_d, a_p = direct_chunk(pair, "rdpc", 0.5, level=2, unit=0, start=4, stop=12, seed=9)
    np.testing.assert_array_equal(a_d, e_d[4:12])
    np.testing.assert_array_equal(a_p, e_p[4:12])


def test_kept_events_have_enough_counts_and_ge_counts_are_tails() -> None:
    d = np.array([0, 0, 0, 1, 1, 2, 5], dtype=float)
    dp = np.array([0, 1, 1, 1, 2, 2, 2], dtype=float)
    eq = direct_log_ratio(d, dp, min_events=2)
    np.testing.assert_array_equal(eq.k, [1.0])  # only k = 1 has >= 2 in both (2 and 3)
    assert eq.log_ratio[0] == pytest.approx(np.log(2 / 3))
    ge = direct_log_ratio(d, dp, event="ge", min_events=2)
    # {e >= 0} holds for all 7 in both: dropped; {e >= 1}: 4 vs 6; {e >= 2}: 2 vs 3
    np.testing.assert_array_equal(ge.k, [1.0, 2.0])
    np.testing.assert_allclose(ge.log_ratio, [np.log(4 / 6), np.log(2 / 3)])
    assert direct_log_ratio(d, dp, min_events=50).status == "too_few"
    # ADPC-like errors on Z/4 with bins of 1/4
    q = direct_log_ratio(d / 4, dp / 4, min_events=2, bin_width=0.25)
    np.testing.assert_array_equal(q.k, [0.25])


def test_bad_inputs_name_the_value() -> None:
    ok = np.arange(10.0)
    with pytest.raises(InvalidParameterError, match="errors_d_prime"):
        direct_log_ratio(ok, np.array([1.0, np.nan]))
    with pytest.raises(InvalidParameterError, match="errors_d"):
        direct_log_ratio(np.empty(0), ok)
    with pytest.raises(InvalidParameterError, match="event"):
        direct_log_ratio(ok, ok, event="le")
    with pytest.raises(InvalidParameterError, match="min_events"):
        direct_log_ratio(ok, ok, min_events=0)
    with pytest.raises(InvalidParameterError, match="bin_width"):
        direct_log_ratio(ok, ok, bin_width=0)
    pair = move_between_areas(generate_population(2_000, 2, 20, seed=1), 0, 5)
    with pytest.raises(InvalidParameterError, match="replicate range"):
        direct_chunk(pair, "gdpc", 1.0, level=2, unit=0, start=5, stop=5, seed=1)
    with pytest.raises(InvalidParameterError, match="level"):
        direct_chunk(pair, "gdpc", 1.0, level=1, unit=0, start=0, stop=2, seed=1)
