"""Per-block histograms: exact row sums, keyed reproducibility, shares near their targets (with power)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from auditlib.exceptions import InvalidParameterError
from auditlib.geography.populations import (
    HistogramModel,
    block_histograms,
    multinomial_rows,
    national_shares,
    spine_state_histograms,
)
from auditlib.geography.schema import custom_schema, schema
from auditlib.geography.spine import generate_spine, tallies_2020


def _pops(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pops = rng.negative_binomial(0.8, 0.8 / 30.8, size=n)
    pops[rng.random(n) < 0.3] = 0
    return pops


def test_rows_sum_to_populations_and_cells_are_sparse() -> None:
    pops = _pops(20_000)
    h = block_histograms(pops, schema("pl94"), np.random.default_rng(1))
    assert h.dtype == np.int32 and h.shape == (20_000, 28)
    assert h.min() >= 0
    np.testing.assert_array_equal(h.sum(axis=1), pops)
    occupied = pops > 0
    # segregated blocks: most cells of an occupied block are empty
    assert (h[occupied] == 0).mean() > 0.6
    total = schema("total")
    np.testing.assert_array_equal(
        block_histograms(pops, total, np.random.default_rng(1))[:, 0], pops
    )


def test_chunking_and_seed_reproducibility() -> None:
    pops = _pops(5_000, seed=2)
    a = block_histograms(pops, schema("pl94"), np.random.default_rng(7))
    b = block_histograms(pops, schema("pl94"), np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    c = block_histograms(pops, schema("pl94"), np.random.default_rng(8))
    assert not np.array_equal(a, c)
    small = block_histograms(
        pops, schema("pl94"), np.random.default_rng(7), model=HistogramModel(chunk_blocks=999)
    )
    np.testing.assert_array_equal(small.sum(axis=1), pops)


def test_shares_near_target_with_power() -> None:
    """With fixed state shares and no group/block dispersion the pooled cell counts are one
    multinomial: a chi-square test accepts the true shares and rejects shares perturbed by 10 %."""
    s = custom_schema("race", [("race", ["a", "b", "c", "d"])])
    target = np.array([0.5, 0.3, 0.15, 0.05])
    pops = _pops(4_000, seed=3)
    flat = HistogramModel(group_concentration=1e9, block_concentration=1e9)
    h = block_histograms(pops, s, np.random.default_rng(11), shares=target, model=flat)
    observed = h.sum(axis=0)
    n = pops.sum()
    assert stats.chisquare(observed, n * target).pvalue > 0.01
    wrong = np.array([0.55, 0.27, 0.13, 0.05])  # 10 % more of the largest cell
    assert stats.chisquare(observed, n * wrong).pvalue < 1e-6


def test_skewed_shares_average_to_the_state_shares() -> None:
    """Under the full (segregated) model, E[h_b] = n_b · p_state: the pooled share of each race is
    within 5 standard errors of the target (blocks are independent given the group shares; the
    standard error is estimated from block-level variation)."""
    s = schema("pl94")
    target = national_shares(s)
    pops = _pops(30_000, seed=4)
    model = HistogramModel(group_concentration=1e9, block_concentration=1.0)
    h = block_histograms(pops, s, np.random.default_rng(5), shares=target, model=model)
    race = s.answer(h, "race").astype(float)
    n = pops.sum()
    # ratio estimator per race: Σ h / Σ n, its standard error from the block residuals
    share = race.sum(axis=0) / n
    resid = race - pops[:, None] * share
    se = np.sqrt((resid**2).sum(axis=0)) / n
    want = s.answer(target, "race")
    assert np.all(np.abs(share - want) < 5 * se)
    # power: a target off by 10 % relative in the white share is far outside
    assert np.abs(share[0] - 1.1 * want[0]) > 5 * se[0]


def test_national_shares_pl94() -> None:
    p = national_shares(schema("pl94"))
    assert p.shape == (28,) and p.sum() == pytest.approx(1.0)
    s = schema("pl94")
    # 2020 Census PL94-171: 18+ 258,343,281 of 331,449,281; Hispanic 62,080,044; Asian 19,886,049
    assert s.answer(p, "votingage")[1] == pytest.approx(258_343_281 / 331_449_281)
    assert s.answer(p, "hispanic")[1] == pytest.approx(62_080_044 / 331_449_281)
    assert s.answer(p, "race")[3] == pytest.approx(19_886_049 / 331_449_281)
    np.testing.assert_allclose(national_shares(schema("total")), [1.0])


def test_multinomial_rows_law() -> None:
    """Chain of binomials = multinomial: cell counts of n = 10 over p match scipy's multinomial pmf."""
    rng = np.random.default_rng(9)
    p = np.array([0.1, 0.6, 0.3])
    rows = 20_000
    x = multinomial_rows(rng, np.full(rows, 10), np.tile(p, (rows, 1)))
    np.testing.assert_array_equal(x.sum(axis=1), 10)
    # the first cell's law is Binomial(10, 0.1); compare the (cell 0) frequencies by chi-square
    k = np.arange(11)
    obs = np.bincount(x[:, 0], minlength=11)
    exp = rows * stats.binom.pmf(k, 10, 0.1)
    keep = exp > 5
    obs_k = np.append(obs[keep], obs[~keep].sum())
    exp_k = np.append(exp[keep], exp[~keep].sum())
    assert stats.chisquare(obs_k, exp_k).pvalue > 0.01
    exp_wrong = rows * stats.binom.pmf(k, 10, 0.13)
    exp_wrong_k = np.append(exp_wrong[keep], exp_wrong[~keep].sum())
    assert stats.chisquare(obs_k, exp_wrong_k * obs_k.sum() / exp_wrong_k.sum()).pvalue < 1e-6


def test_spine_state_histograms_are_keyed_by_state() -> None:
    t = tallies_2020()["US"].scaled(0.002)
    spine = generate_spine(4, totals={"US": t})
    s = schema("pl94")
    h3 = spine_state_histograms(spine, 3, s, seed=12)
    in_state = spine.state_of("Block") == 3
    np.testing.assert_array_equal(h3.sum(axis=1), spine.block_population[in_state])
    np.testing.assert_array_equal(h3, spine_state_histograms(spine, 3, s, seed=12))
    h4 = spine_state_histograms(spine, 4, s, seed=12)
    np.testing.assert_array_equal(
        h4.sum(axis=1), spine.block_population[spine.state_of("Block") == 4]
    )
    with pytest.raises(
        InvalidParameterError, match=r"Invalid state: 99; the spine has states 0\.\.50"
    ):
        spine_state_histograms(spine, 99, s, seed=12)


def test_bad_inputs_name_the_value() -> None:
    s = schema("pl94")
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match=r"block_population\[2\] = -3.*>= 0"):
        block_histograms(np.array([1, 2, -3]), s, rng)
    with pytest.raises(InvalidParameterError, match=r"block_population\[1\] = 2.5.*whole numbers"):
        block_histograms(np.array([1.0, 2.5]), s, rng)
    with pytest.raises(InvalidParameterError, match="1-D array"):
        block_histograms(np.ones((2, 2), dtype=int), s, rng)
    with pytest.raises(InvalidParameterError, match="give 28 finite non-negative"):
        block_histograms(np.array([1, 2]), s, rng, shares=np.ones(3))
    with pytest.raises(InvalidParameterError, match="one integer per block"):
        block_histograms(np.array([1, 2]), s, rng, groups=np.array([0]))
    with pytest.raises(InvalidParameterError, match="block_concentration: -1"):
        HistogramModel(block_concentration=-1)
    with pytest.raises(InvalidParameterError, match="Generator"):
        block_histograms(np.array([1, 2]), s, 5)  # type: ignore[arg-type]
