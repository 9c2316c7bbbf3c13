"""Randomized response in the catalogue, and the catalogue entries the coverage flow can run.

References: Warner (1965) for the protocol; the exact ε of k-ary RR with keep probability γ is
ln(1 + kγ/(1 − γ)) (derived in ``randomized_response.rr_keep_probability``); for k = 2 and a correct
γ the true bit is reported with probability e^ε/(1 + e^ε) (Dwork & Roth, §3.2). The discrete Gaussian
census count's ε*_C on C = c ± r is (2r + 1)/(2σ²) (ℓ affine in t, docs/mpl.md).
"""

from __future__ import annotations

import itertools
import math
import pathlib

import numpy as np
import pytest
from scipy import stats

from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.mpl import randomized_response
from auditlib.mpl.coverage import CATALOGUE, coverage_chunk, known_mechanism
from auditlib.mpl.randomized_response import (
    RandomizedResponseSampler,
    rr_epsilon,
    rr_keep_probability,
)
from tests.unit._mpl import mpl_of


def _enumerated_pmf(x: int, k: int, keep: float) -> np.ndarray:
    """P(report | x) by listing every outcome of (coin, uniform draw) with its probability."""
    out = np.zeros(k)
    for heads, u in itertools.product((True, False), range(k)):
        p = (keep if heads else 1.0 - keep) / k
        out[x if heads else u] += p
    return out


@pytest.mark.parametrize("k", [2, 3, 4, 7])
@pytest.mark.parametrize("eps", [0.2, 0.7, 1.5])
def test_exact_epsilon_by_enumeration_matches_closed_form(k: int, eps: float) -> None:
    e = randomized_response(eps, k=k)
    keep = rr_keep_probability(eps, k)
    table = np.array([_enumerated_pmf(x, k, keep) for x in range(k)])
    np.testing.assert_allclose(table.sum(axis=1), 1.0, rtol=1e-15)
    brute = np.array([np.max(np.abs(np.log(table[a]) - np.log(table[b]))) for a, b in e.pairs])
    assert len(e.pairs) == k * (k - 1) // 2
    np.testing.assert_allclose(brute, eps, rtol=1e-12)  # the claimed ε is exact
    np.testing.assert_allclose(e.epsilon_c_pairs, brute, rtol=1e-12)
    assert e.epsilon == pytest.approx(eps, rel=1e-12)
    for x in range(k):
        np.testing.assert_allclose(np.exp(e.log_pmf(x, np.arange(k))), table[x], rtol=1e-12)


@pytest.mark.parametrize("eps", [0.2, 0.7, 1.5])
def test_binary_rr_reports_the_true_bit_with_e_eps_over_one_plus_e_eps(eps: float) -> None:
    e = randomized_response(eps)
    p_true = math.exp(eps) / (1.0 + math.exp(eps))
    assert math.exp(e.log_pmf(1, np.array([1]))[0]) == pytest.approx(p_true, rel=1e-14)
    assert math.exp(e.log_pmf(1, np.array([0]))[0]) == pytest.approx(1 - p_true, rel=1e-13)


@pytest.mark.parametrize(("keep", "k"), [(0.3, 4), (0.9, 2), (0.0, 5)])
def test_mis_parameterised_rr_epsilon_by_enumeration(keep: float, k: int) -> None:
    table = np.array([_enumerated_pmf(x, k, keep) for x in range(k)])
    brute = np.max(np.abs(np.log(table[0]) - np.log(table[1])))
    assert rr_epsilon(keep, k) == pytest.approx(brute, abs=1e-13)
    e = randomized_response(0.1, k=k, keep=keep)
    assert e.claimed_epsilon == 0.1 and e.epsilon_c == pytest.approx(brute, abs=1e-13)


def test_sampler_follows_its_law() -> None:
    k, keep = 4, rr_keep_probability(0.7, 4)
    draws = RandomizedResponseSampler(k, keep)(2, 40_000, np.random.default_rng(3))
    assert draws.dtype == np.int64 and draws.shape == (40_000,)
    counts = np.bincount(draws, minlength=k)
    p = stats.chisquare(counts, 40_000 * _enumerated_pmf(2, k, keep)).pvalue
    assert p > 1e-3
    # power: the law of a different keep probability is rejected
    wrong = stats.chisquare(counts, 40_000 * _enumerated_pmf(2, k, keep + 0.03)).pvalue
    assert wrong < 1e-6


def _lbs(name: str, eps: float, reps: int, seed: int) -> tuple[np.ndarray, float]:
    r = coverage_chunk(name, eps, 0, reps, n=5_000, n_confidence=12_500, seed=seed)
    return r["lb"], r["epsilon_c"]


@pytest.mark.parametrize("name", ["randomized_response", "randomized_response_k4"])
def test_rr_coverage(name: str) -> None:
    # measured over 100 repetitions at ε₀ = 0.2 / 0.7 / 1.5: 0.95-0.99 (binomial sd 0.022)
    lbs, eps_c = _lbs(name, 0.7, 100, seed=611)
    assert np.mean(lbs <= eps_c) >= 0.95 - 0.08
    assert np.median(lbs) > 0.8 * eps_c  # not trivially low: median 0.67 at ε*_C = 0.7


def test_rr_broken_is_detected() -> None:
    # 4-ary RR with the binary keep probability claims 0.7, is ln(1 + 2(e^0.7 − 1)) = 1.108-DP
    lbs, eps_c = _lbs("randomized_response_broken", 0.7, 40, seed=612)
    assert eps_c == pytest.approx(math.log(1 + 2 * math.expm1(0.7)), rel=1e-12)
    assert np.mean(lbs > 0.7) >= 0.95
    assert np.mean(lbs <= eps_c) >= 0.85
    # the correct 4-ary RR at the same seed is not flagged
    ok, _ = _lbs("randomized_response_k4", 0.7, 40, seed=612)
    assert np.mean(ok > 0.7) <= 0.15


def test_rr_mpl_finds_the_pair_output() -> None:
    e = randomized_response(1.5, k=3)
    r = mpl_of(e, 5_000, 12_500, seed=5)
    xa, xb = e.pairs[r.best]
    assert int(r.t_hat_max) in (xa, xb)  # the loss sits at the inputs' own values


def test_census_dg_count_entry() -> None:
    assert {"census_dg_count", "gdpc_count", "randomized_response"} <= set(CATALOGUE)
    e = known_mechanism("census_dg_count", 0.7)
    sigma2 = 1.0 / 0.7**2
    r = math.ceil(2.0 * math.sqrt(sigma2))
    assert e.epsilon == math.inf and e.region.points.size == 2 * r + 1
    np.testing.assert_allclose(e.epsilon_c_pairs, (2 * r + 1) / (2 * sigma2), rtol=1e-9)
    lbs, eps_c = _lbs("census_dg_count", 0.7, 30, seed=613)
    assert np.mean(lbs <= eps_c) >= 0.8 and np.median(lbs) > 0.5 * eps_c


def test_bad_rr_inputs_are_named() -> None:
    with pytest.raises(InvalidParameterError, match="Invalid k: 1"):
        randomized_response(0.7, k=1)
    with pytest.raises(InvalidParameterError, match=r"Invalid keep: 1\.0"):
        randomized_response(0.7, keep=1.0)
    with pytest.raises(InvalidParameterError, match="Invalid epsilon"):
        randomized_response(-0.7)
    with pytest.raises(InvalidParameterError, match=r"Invalid input: 4; .* 0\.\.3"):
        RandomizedResponseSampler(4, 0.5)(4, 10, np.random.default_rng(0))
    with pytest.raises(UnknownNameError, match="randomized_response_k4"):
        known_mechanism("rr", 0.7)  # the message lists the allowed names


def test_mpl_coverage_help_lists_the_catalogue() -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app
    from flows.cli.experiments import MPL_CATALOGUE_NAMES

    assert MPL_CATALOGUE_NAMES.split(", ") == list(CATALOGUE)
    out = CliRunner().invoke(app, ["mpl-coverage", "--help"], env={"COLUMNS": "400"})
    assert out.exit_code == 0
    flat = " ".join(out.output.replace("│", " ").split())
    for name in CATALOGUE:
        assert name in flat, name


def test_coverage_dataset_keeps_the_claim_and_the_edge_flag() -> None:
    from flows.experiments.mpl_coverage import coverage_dataset
    from flows.report.figures_mpl import coverage_ecdf_figure

    settings = {"n": 2_000, "n_confidence": 5_000, "alpha": 0.05, "seed": 9}
    mechs, eps = ["census_dg_count", "randomized_response_broken"], [0.7]
    results = {
        (mi, 0, 0): coverage_chunk(m, 0.7, 0, 8, cell=(mi, 0), **settings)
        for mi, m in enumerate(mechs)
    }
    ds = coverage_dataset(results, mechs, eps, 8, settings)
    dg, rr = ds.sel(mechanism="census_dg_count"), ds.sel(mechanism="randomized_response_broken")
    # the DG claims no pure ε: an LB above ε₀ (= μ, σ = 1/ε₀) is not counted as a refutation
    assert float(dg.claimed_epsilon.item()) == math.inf
    assert float(dg.exceeds_claim.item()) == 0.0 and float(np.mean(dg.lb.values > 0.7)) > 0.5
    assert float(rr.claimed_epsilon.item()) == 0.7 and float(rr.exceeds_claim.item()) == 1.0
    np.testing.assert_array_equal(ds.edge.values[0, 0], results[0, 0, 0]["edge"])
    # the figure marks a claim only where there is one
    fig = coverage_ecdf_figure(ds)
    dotted = [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == ":"]
    assert dotted == []
    assert len([ln for ln in fig.axes[1].get_lines() if ln.get_linestyle() == ":"]) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-m", "randomized_response", "-m", "randomized_response"], "--mechanism: randomized_"),
        (["-e", "0.7", "-e", "0.7"], r"--epsilon: 0\.7 given twice"),
        (["-m", "rr_k9"], "Unknown mechanism: 'rr_k9'"),
    ],
)
def test_mpl_coverage_bad_input_exits_2_and_writes_nothing(
    argv: list[str], message: str, tmp_path: pathlib.Path
) -> None:
    import re

    from typer.testing import CliRunner

    from flows.cli.app import app

    url = tmp_path / "cov.zarr"
    out = CliRunner().invoke(app, ["mpl-coverage", *argv, "--store", str(url)])
    assert out.exit_code == 2
    assert re.search(message, out.output)
    assert not url.exists()
