"""The two-sample test of a release declared post-processed (auditlib.claims.two_sample): size
classes by their definition, the one-sided rank test against a brute-force enumeration of its
null, its false-refutation rate on true claims (≤ α), its power on half-noise claims, the
detectable ratio's 80 % power checked by simulation, the verdict's three words, bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from auditlib.claims import Verdict
from auditlib.claims.two_sample import (
    POWER,
    RESOLVE_SPREAD,
    SIZE_EDGES,
    compare_sizes,
    detectable_ratio,
    judge_post_processed,
    size_class,
    size_labels,
)
from auditlib.exceptions import InvalidParameterError

#: truth of a made-up level: zeros, small, medium and large counts
TRUTH = np.repeat([0, 3, 40, 400], [60, 40, 30, 10])


def release(truth: np.ndarray, sigma: float, runs: int, rng: np.random.Generator) -> np.ndarray:
    """Residuals of a post-processed release: rounded Gaussian noise, the counts clipped at 0
    (so the residuals of small counts are biased up, as TopDown's are)."""
    noisy = np.rint(truth + rng.normal(0.0, sigma, (runs, truth.size)))
    return np.maximum(noisy, 0) - truth


def test_size_classes_follow_their_edges() -> None:
    t = np.array([0, 1, 9, 10, 99, 100, 999, 1000, 10**7])
    assert list(size_class(t)) == [0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert size_labels() == ["0", "1–9", "10–99", "100–999", "≥ 1000"]
    assert len(size_labels()) == len(SIZE_EDGES)
    with pytest.raises(InvalidParameterError, match="negative"):
        size_class(np.array([3, -1]))


def test_the_rank_test_matches_a_brute_force_enumeration_of_its_null() -> None:
    """4 published runs against 6 reference runs: under the claim every choice of which 4 of the
    10 run statistics are the published ones is equally likely; p = P(mean |r| rank sum ≤
    observed). The test is one-sided: smaller published errors give small p."""
    rng = np.random.default_rng(5)
    truth = np.full(25, 50)
    pub = release(truth, 1.0, 4, rng)
    ref = release(truth, 2.0, 6, rng)
    (c,) = compare_sizes(pub, truth, ref, truth, threshold=0.05)
    stat = np.concatenate([np.abs(pub).mean(axis=1), np.abs(ref).mean(axis=1)])
    assert len(set(stat)) == stat.size  # no ties: the exact null is the enumeration
    ranks = stat.argsort().argsort()
    observed = ranks[:4].sum()
    sums = [sum(ranks[list(ix)]) for ix in itertools.combinations(range(10), 4)]
    p = np.mean([s <= observed for s in sums])
    assert c.p_value == pytest.approx(p, rel=1e-9)
    assert c.p_value < 0.05  # half the noise: seen
    (back,) = compare_sizes(ref[:4], truth, np.vstack([pub, ref[4:]]), truth, threshold=0.05)
    assert back.p_value > 0.5  # more noise than the reference: not "less noise"


def false_refutations(sigma_published: float, seeds: int, alpha: float = 0.05) -> float:
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(seeds):
        pub = release(TRUTH, sigma_published, 10, rng)
        ref = release(TRUTH, 2.0, 40, rng)
        m = len(np.unique(size_class(TRUTH)))
        cs = compare_sizes(pub, TRUTH, ref, TRUTH, threshold=alpha / m, power=False)
        hits += any(c.p_value < alpha / m for c in cs)
    return hits / seeds


def test_true_claims_are_refuted_at_most_at_rate_alpha_and_half_claims_nearly_always() -> None:
    """400 true claims (published and reference from the same release): refuted ≤ α = 5 % (plus
    three binomial standard errors); half-noise releases (σ 1 against a declared 2, ε about
    twice) refuted in ≥ 95 % of 100 seeds; releases with twice the noise never."""
    assert false_refutations(2.0, 400) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 400)
    assert false_refutations(1.0, 100) >= 0.95
    assert false_refutations(4.0, 100) == 0.0


def test_the_detectable_ratio_has_its_stated_power() -> None:
    """Run statistics normal with the reference's mean and spread: published ones scaled by the
    detectable ratio are refuted in about 80 % of trials (the library finds the ratio by
    simulating the rank test on its own stream; here on another)."""
    rng = np.random.default_rng(3)
    runs, ref_runs, thr = 10, 40, 0.01
    mu, sd = 2.0, 0.1
    x = rng.standard_normal(ref_runs)
    k = detectable_ratio(mu + sd * (x - x.mean()) / x.std(ddof=1), runs, thr)
    assert 0.8 < k < 1.0
    from scipy import stats

    trials = 600
    hits = sum(
        stats.mannwhitneyu(
            rng.normal(k * mu, sd, runs), rng.normal(mu, sd, ref_runs), alternative="less"
        ).pvalue
        < thr
        for _ in range(trials)
    )
    assert 0.72 <= hits / trials <= 0.88, hits / trials
    assert POWER == 0.8
    # too few runs for the threshold at all: nothing is detectable
    assert detectable_ratio(rng.normal(mu, sd, 10), 2, 0.01) == 0.0  # 1 / C(12, 2) > 0.01


def verdict(pub_sigma: float, runs: int, seed: int = 1) -> Verdict:
    rng = np.random.default_rng(seed)
    pub = release(TRUTH, pub_sigma, runs, rng)
    ref = release(TRUTH, 2.0, 40, rng)
    thr = 0.05 / 4
    cs = compare_sizes(pub, TRUTH, ref, TRUTH, threshold=thr)
    return judge_post_processed(
        "Block", cs, threshold=thr, declared_eps=2.79, delta=1e-10, measured_at="village"
    )


def test_the_verdict_reads_refuted_consistent_or_undecided() -> None:
    half = verdict(1.0, 20)
    assert half.verdict == "refuted"
    assert half.sentence.startswith("refuted: less noise than declared — 20 published runs at")
    assert half.evidence["p_value"] < half.evidence["threshold"]
    true = verdict(2.0, 20)
    assert true.verdict == "consistent", true.sentence
    assert "would be seen with 80% power" in true.sentence
    assert all(s["detectable"] >= RESOLVE_SPREAD for s in true.evidence["sizes"][-1:])
    conservative = verdict(4.0, 20)
    assert conservative.verdict == "consistent"
    few = verdict(2.0, 2)  # 2 runs: no size class can reach α/m
    assert few.verdict == "undecided"
    assert "more published runs would decide" in few.sentence
    assert few.evidence["test"] == "two_sample" and few.evidence["runs"] == 2


def test_bad_residuals_are_refused_by_name() -> None:
    rng = np.random.default_rng(0)
    ref = release(TRUTH, 2.0, 10, rng)
    bad = ref.copy()
    bad[0, 0] = np.nan
    with pytest.raises(InvalidParameterError, match="NaN"):
        compare_sizes(bad, TRUTH, ref, TRUTH, threshold=0.01)
    with pytest.raises(InvalidParameterError, match="shape"):
        compare_sizes(ref[:, :5], TRUTH, ref, TRUTH, threshold=0.01)
    with pytest.raises(InvalidParameterError, match="not the published release's"):
        compare_sizes(ref, TRUTH, ref, TRUTH + 1, threshold=0.01)
    with pytest.raises(InvalidParameterError, match="threshold"):
        compare_sizes(ref, TRUTH, ref, TRUTH, threshold=0.7)
