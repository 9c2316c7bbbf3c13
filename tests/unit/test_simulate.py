"""Simulated releases: residuals follow the discrete Gaussian, truths are consistent, runs reproduce."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError
from auditlib.geography import PopulationParams, SyntheticHierarchy, state_level_populations
from auditlib.simulate import QueryPlan, cell_shares, simulate_block, true_cell_counts
from auditlib.simulate.synthetic import simulate_synthetic_block

H = SyntheticHierarchy(("State", "County", "Block"), (4, 50), 2)
P = PopulationParams(seed=5, mean_block_population=20.0)


def dg_pmf(sigma2: float, k: np.ndarray) -> np.ndarray:
    """Independent reference: the N_Z(0, sigma2) pmf by direct normalization over a wide range."""
    full = np.arange(-2000, 2001)
    w = np.exp(-(full.astype(float) ** 2) / (2 * sigma2))
    return np.exp(-(k.astype(float) ** 2) / (2 * sigma2)) / w.sum()


def test_residuals_follow_the_discrete_gaussian_and_wrong_sigma_fails() -> None:
    q = [(0, QueryPlan("a", 10, 10, 5.0)), (1, QueryPlan("b", 4, 4, 456.62))]
    blk = simulate_synthetic_block(
        hierarchy=H,
        params=P,
        state=1,
        geolevel="Block",
        geolevel_index=2,
        queries=q,
        replicates=40,
        noise_seed=9,
    )
    assert blk.residual.shape == (40, 200 * 14)
    for qid, s2 in ((0, 5.0), (1, 456.62)):
        r = blk.residual[:, blk.query_index == qid].ravel().astype(int)
        # chi-square goodness of fit on bins, against the exact pmf; power: sigma2 off by 30 % fails
        edges = np.quantile(r, np.linspace(0, 1, 12)[1:-1]).astype(int)
        edges = np.unique(edges)
        bins = np.concatenate([[-(10**6)], edges, [10**6]])
        obs = np.histogram(r, bins=bins)[0]
        ks = np.arange(-5000, 5001)
        which = np.digitize(ks, bins) - 1  # bin of each integer k, same [a, b) rule as histogram
        for true_s2, should_pass in ((s2, True), (1.3 * s2, False), (0.7 * s2, False)):
            exp = np.bincount(which, weights=dg_pmf(true_s2, ks), minlength=obs.size) * r.size
            p = stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue
            assert (p > 1e-3) if should_pass else (p < 1e-6), (qid, true_s2, p)


def test_truth_is_multinomial_in_unit_population() -> None:
    pops = state_level_populations(H, P, 2)["County"]
    shares = cell_shares(10, 10, 0.5, np.random.default_rng(1))
    assert shares[-1] == 0 and shares.sum() == pytest.approx(1)
    t = true_cell_counts(pops, shares, np.random.default_rng(2))
    np.testing.assert_array_equal(t.sum(axis=1), pops)  # all cells simulated: sums are exact
    partial = cell_shares(1000, 8, 0.5, np.random.default_rng(1))
    t2 = true_cell_counts(pops, partial, np.random.default_rng(2))
    assert t2.shape == (4, 8) and (t2.sum(axis=1) <= pops).all()


def test_nonnegative_postprocessing_clips_dp_counts() -> None:
    truth = np.zeros((30, 5), dtype=np.int64)
    truth[:, 0] = 1000
    rngs = [seeds.rng(1, seeds.NOISE, 0, 0, r) for r in range(3)]
    blk = simulate_block([truth], [QueryPlan("a", 5, 5, 50.0)], [0], rngs, "nonnegative")
    dp = blk.residual + blk.truth
    assert (dp >= 0).all()
    zero_cells = blk.truth == 0
    assert (blk.residual[:, zero_cells] >= 0).all() and (blk.residual[:, zero_cells] > 0).any()
    raw = simulate_block([truth], [QueryPlan("a", 5, 5, 50.0)], [0], rngs[:0], "none")
    assert raw.residual.shape == (0, 150)


def test_blocks_are_reproducible_and_keyed() -> None:
    q = [(0, QueryPlan("a", 10, 6, 5.0))]
    kw = dict(hierarchy=H, params=P, geolevel="County", geolevel_index=1, queries=q, replicates=3)
    a = simulate_synthetic_block(state=1, noise_seed=4, **kw)
    b = simulate_synthetic_block(state=1, noise_seed=4, **kw)
    c = simulate_synthetic_block(state=2, noise_seed=4, **kw)
    np.testing.assert_array_equal(a.residual, b.residual)
    np.testing.assert_array_equal(a.truth, b.truth)
    assert not np.array_equal(a.residual, c.residual)
    # replicate r does not depend on how many replicates are drawn
    d = simulate_synthetic_block(state=1, noise_seed=4, **{**kw, "replicates": 2})
    np.testing.assert_array_equal(a.residual[:2], d.residual)


def test_bad_inputs_raise() -> None:
    with pytest.raises(InvalidParameterError, match="Invalid sigma2: -1"):
        QueryPlan("a", 3, 3, -1.0)
    with pytest.raises(InvalidParameterError, match="Invalid n_sim 5"):
        QueryPlan("a", 3, 5, 1.0)
    with pytest.raises(InvalidParameterError, match="unit populations"):
        true_cell_counts(np.array([-1, 2]), np.array([0.5, 0.5]), np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match="Invalid postprocess"):
        simulate_block([], [], [], [], "round")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="Invalid truth shape"):
        simulate_block([np.zeros((2, 3), int)], [QueryPlan("a", 4, 4, 1.0)], [0], [])
