"""AMC error bars of published TopDown counts (auditlib.published), against independent references.

* Variance: children of one parent measured with the ``pl94_2021_production`` Block-level total's
  σ², far from zero, their sum held: TopDown is the projection of the noisy measurements onto the
  sum and rounding, so each child's variance is ``σ² (1 − 1/k)`` (plus < 1/4 of rounding).
* Areas: the streamed moments of area sums equal those of the stored replicates' area sums,
  computed here by plain loops.
* Power: a synthetic state's true counts ``T``, one release ``P`` of it, AMC from ``P``; the
  Bureau's interval reaches its nominal coverage on the large counts, while the variance-only and
  a too-narrow interval are caught under-covering. (Counts near zero are not judged: the method
  is not claimed there.)
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from auditlib.allocations import load_allocation
from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.published import (
    AreaMap,
    MomentAccumulator,
    Moments,
    amc_interval,
    amc_replicates,
    area_map,
    area_moments,
    bias_correction_applies,
    critical_value,
    replicate_rngs,
)
from auditlib.simulate.topdown import TOTAL_QUERIES, StateHierarchy, topdown

LEVELS2 = ("State", "County")


def _block_total_sigma2() -> float:
    """σ² of the production allocation's Block-level total (persons, bounded neighbours)."""
    alloc = load_allocation("pl94_2021_production")
    (total,) = [b for b in alloc.select("persons", "US", "Block") if b.query == "total"]
    return float(total.noise_variance("bounded"))


def _moments(published: list[float], reps: list[list[float]]) -> Moments:
    acc = MomentAccumulator(np.asarray(published, dtype=float)[:, None])
    for r in reps:
        acc.add(np.asarray(r, dtype=float)[:, None])
    return acc.moments()


# ---------------------------------------------------------------- moments and intervals


def test_moments_follow_the_papers_definitions() -> None:
    reps = np.array([[12.0, 3.0], [8.0, 1.0], [13.0, 0.0], [11.0, 4.0]])
    m = _moments([10.0, 2.0], reps.tolist())
    np.testing.assert_allclose(m.bias[:, 0], reps.mean(axis=0) - [10.0, 2.0])
    np.testing.assert_allclose(m.variance[:, 0], reps.var(axis=0, ddof=1))
    np.testing.assert_allclose(m.mse[:, 0], ((reps - [10.0, 2.0]) ** 2).mean(axis=0))
    # MSE (divisor R) = bias² + (R − 1)/R · variance
    np.testing.assert_allclose(m.mse, m.bias**2 + 3 / 4 * m.variance)


def test_interval_is_the_bureaus_ct_interval() -> None:
    # bias −6 with sd < 12: corrected (P > 5, |b| >= s/2, b < 0); bias +3 at P = 8: not (P < 25)
    m = _moments([100.0, 8.0], [[90.0, 10.0], [96.0, 12.0], [92.0, 9.0], [98.0, 13.0]])
    iv = amc_interval(m, 0.1)
    t5 = 2.015048372669157  # Student's t, 5 degrees of freedom, 95th percentile
    assert critical_value(0.1) == pytest.approx(t5)
    assert critical_value(0.1, "normal") == pytest.approx(1.6448536269514722)
    assert iv.bias_corrected[:, 0].tolist() == [True, False]
    assert iv.centre[0, 0] == pytest.approx(106.0)
    assert iv.centre[1, 0] == pytest.approx(8.0)
    rmse = np.sqrt(m.mse[:, 0])
    assert iv.lower[0, 0] == np.floor(106.0 - t5 * rmse[0])
    assert iv.upper[0, 0] == np.ceil(106.0 + t5 * rmse[0])
    assert iv.lower[1, 0] == max(0.0, np.floor(8.0 - t5 * rmse[1]))
    raw = amc_interval(m, 0.1, integer=False, bias_correction="never", spread="sd")
    np.testing.assert_allclose(raw.upper[:, 0] - raw.lower[:, 0], 2 * t5 * m.sd[:, 0])


def test_conditional_rule_thresholds() -> None:
    # P = 5 never corrected; positive bias corrected only from P = 25 up; small bias never
    cases = {
        (5.0, -3.0): False,
        (6.0, -3.0): True,
        (24.0, 3.0): False,
        (25.0, 3.0): True,
        (100.0, 0.1): False,
    }
    for (p, b), want in cases.items():
        m = Moments(np.array([[p]]), np.array([[2 * b]]), np.array([[2 * b * b + 2.0]]), 2)
        # two replicates b ± 1: sd = √2, |b|/sd >= 0.5 for |b| >= 0.71
        assert bool(bias_correction_applies(m)[0, 0]) is want, (p, b)


# ---------------------------------------------------------------- AMC runs


def test_variance_matches_the_closed_form_of_the_projection() -> None:
    sigma2 = _block_total_sigma2()  # 7,963: rounding (< 1/4) is negligible against it
    k, r = 200, 40
    h = StateHierarchy.from_fanouts(LEVELS2, (k,))
    published = np.full((k, 1), 100_000)  # 1,100 σ from zero: non-negativity never binds
    res = amc_replicates(h, published, TOTAL_QUERIES, [[("total", 1.0)], [("total", sigma2)]], r, 3)
    m = res.levels["County"]["total"]
    expected = sigma2 * (1 - 1 / k)
    # pooled over k units: relative sd of the mean of k sample variances ≈ √(2/((r−1)k)) = 1.1 %
    assert m.variance.mean() / expected == pytest.approx(1.0, abs=0.05)
    assert m.mse.mean() / expected == pytest.approx(1.0, abs=0.05)
    # no bias: the sum is held and nothing is clipped (each bias has sd √(σ²/r) = 14)
    assert np.abs(m.bias.mean()) < 4 * np.sqrt(expected / r / k)
    assert (res.levels["State"]["total"].mse == 0).all()  # the invariant state total


def test_amc_is_deterministic_given_the_seed() -> None:
    h = StateHierarchy.from_fanouts(("State", "County", "Block"), (3, 4))
    p = np.arange(12, dtype=np.int64)[:, None] * 7
    meas = [[("total", 1.0)], [("total", 4.0)], [("total", 9.0)]]
    a = amc_replicates(h, p, TOTAL_QUERIES, meas, 5, 11)
    b = amc_replicates(h, p, TOTAL_QUERIES, meas, 5, np.random.SeedSequence(11))
    c = amc_replicates(h, p, TOTAL_QUERIES, meas, 5, 12)
    for lv in h.levels:
        np.testing.assert_array_equal(
            a.levels[lv]["total"].sum_sq_dev, b.levels[lv]["total"].sum_sq_dev
        )
    assert not np.array_equal(
        a.levels["Block"]["total"].sum_dev, c.levels["Block"]["total"].sum_dev
    )
    # replicate r's generators do not depend on how many replicates are run
    g1, g2 = replicate_rngs(11, 3, 2)[1], replicate_rngs(11, 3, 2)[1]
    assert g1.integers(1 << 62) == g2.integers(1 << 62)
    assert replicate_rngs(11, 3, 2)[0].integers(1 << 62) != g1.integers(1 << 62)


def test_replicate_ranges_merge_into_one_run() -> None:
    h = StateHierarchy.from_fanouts(("State", "County", "Block"), (2, 3))
    p = np.array([[5], [0], [9], [2], [40], [1]])
    meas = [[("total", 1.0)], [("total", 2.0)], [("total", 3.0)]]
    areas = {"a": [0, 4], "b": [1, 2, 3]}
    kw = {"areas": areas, "keep_bottom": True}
    whole = amc_replicates(h, p, TOTAL_QUERIES, meas, 6, 8, **kw)  # type: ignore[arg-type]
    first = amc_replicates(h, p, TOTAL_QUERIES, meas, 2, 8, **kw)  # type: ignore[arg-type]
    rest = amc_replicates(h, p, TOTAL_QUERIES, meas, 4, 8, first_replicate=2, **kw)  # type: ignore[arg-type]
    merged = first.merge(rest)
    assert merged.n_replicates == 6
    np.testing.assert_array_equal(merged.bottom["total"], whole.bottom["total"])
    for lv in h.levels:
        np.testing.assert_array_equal(
            merged.levels[lv]["total"].sum_sq_dev, whole.levels[lv]["total"].sum_sq_dev
        )
    np.testing.assert_array_equal(merged.areas["total"].sum_dev, whole.areas["total"].sum_dev)
    other = amc_replicates(h, p + 1, TOTAL_QUERIES, meas, 2, 8)
    with pytest.raises(InvalidParameterError, match="same published counts"):
        other.levels["Block"]["total"].merge(first.levels["Block"]["total"])
    with pytest.raises(InvalidParameterError, match="same levels, queries and areas"):
        other.merge(first)


def test_area_moments_are_those_of_per_replicate_area_sums() -> None:
    h = StateHierarchy.from_fanouts(("State", "County", "Block"), (3, 5))
    p = (np.arange(30, dtype=np.int64).reshape(15, 2) * 3) % 17
    q = {"detailed": np.eye(2), "total": np.ones((1, 2))}
    meas = [[("total", 1.0)], [("detailed", 2.0)], [("detailed", 3.0), ("total", 5.0)]]
    areas = {"north": [0, 1, 2, 7], "south": [7, 8, 14], "all": list(range(15))}
    res = amc_replicates(h, p, q, meas, 6, 5, areas=areas, keep_bottom=True)
    # brute force from the stored replicates: area sums per replicate, then numpy's statistics
    for qname in ("detailed", "total"):
        reps = res.bottom[qname].astype(float)  # (R, units, cells)
        pub = p @ q[qname].T
        m = res.areas[qname]
        for j, units in enumerate(areas.values()):
            sums = reps[:, units].sum(axis=1)  # (R, cells)
            p_area = pub[units].sum(axis=0)
            np.testing.assert_allclose(m.published[j], p_area)
            np.testing.assert_allclose(m.bias[j], sums.mean(axis=0) - p_area)
            np.testing.assert_allclose(m.variance[j], sums.var(axis=0, ddof=1), atol=1e-9)
            np.testing.assert_allclose(m.mse[j], ((sums - p_area) ** 2).mean(axis=0))
    assert res.area_names == ("north", "south", "all")
    # the whole state's area is the invariant total: no error at all
    assert res.areas["total"].mse[2, 0] == 0
    # not the sum of the units' variances: the blocks' errors are correlated
    block_var = res.levels["Block"]["total"].variance[:, 0]
    summed = np.array([block_var[u].sum() for u in areas.values()])
    assert np.abs(res.areas["total"].variance[:, 0] - summed).max() > 1.0
    # the same moments from stored replicates, the areas as an index array (County of each block)
    later = area_moments(p @ q["total"].T, res.bottom["total"], np.repeat(np.arange(3), 5))
    np.testing.assert_allclose(later.sum_sq_dev, res.levels["County"]["total"].sum_sq_dev)
    np.testing.assert_allclose(later.sum_dev, res.levels["County"]["total"].sum_dev)


def test_intervals_cover_large_counts_and_catch_narrow_ones() -> None:
    """A state of 8 counties of 41 blocks: one block of 2,000 people and 40 empty ones each; the
    empty blocks' non-negativity pushes them up and, the county's total held, the large block
    down by about 1.8 sd (−13.8 ± 7.8 over 300 releases). T → P = TopDown(T) → AMC(P, R = 10),
    20 times. (Over five other seed bases: ct 0.97–1.00, variance only 0.64–0.71, too narrow
    0.46–0.59.)"""
    c, b, n_p, r = 8, 41, 20, 10
    h = StateHierarchy.from_fanouts(("State", "County", "Block"), (c, b))
    truth = np.zeros((c * b, 1), dtype=np.int64)
    truth[::b] = 2000
    large = truth[:, 0] > 0
    meas = [[("total", 1.0)], [("total", 1.0)], [("total", 100.0)]]
    kinds = {
        "ct": {},
        "variance only": {"spread": "sd", "bias_correction": "never"},
        "too narrow": {"spread": "sd", "bias_correction": "never", "distribution": "normal"},
    }
    covered: dict[str, list[np.ndarray]] = {k: [] for k in kinds}
    for s in range(n_p):
        rngs = [np.random.default_rng([20260, s, lv]) for lv in range(3)]
        published = topdown(h, truth, TOTAL_QUERIES, meas, rngs).dp[-1]
        m = amc_replicates(h, published, TOTAL_QUERIES, meas, r, 1000 + s).levels["Block"]["total"]
        for kind, kw in kinds.items():
            covered[kind].append(amc_interval(m, 0.1, **kw).covers(truth)[large, 0])  # type: ignore[arg-type]
    cover = {k: float(np.mean(v)) for k, v in covered.items()}
    # 160 intervals: the binomial sd of a coverage near 0.9 is 0.024, near 0.7 0.036
    assert cover["ct"] >= 0.85, cover
    assert cover["variance only"] <= 0.80, cover
    assert cover["too narrow"] <= 0.70, cover


# ---------------------------------------------------------------- bad input


def _small() -> tuple[StateHierarchy, np.ndarray, list[list[tuple[str, float]]]]:
    h = StateHierarchy.from_fanouts(("State", "County"), (4,))
    return h, np.full((4, 1), 10), [[("total", 1.0)], [("total", 2.0)]]


def test_bad_alpha_and_replicates_are_refused() -> None:
    m = _moments([10.0], [[9.0], [11.0]])
    for alpha in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(InvalidParameterError, match=rf"alpha: {alpha}.*0 < alpha < 1"):
            amc_interval(m, alpha)
    with pytest.raises(InvalidParameterError, match="bias_correction: 'sometimes'"):
        amc_interval(m, bias_correction="sometimes")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="distribution: 'cauchy'"):
        amc_interval(m, distribution="cauchy")  # type: ignore[arg-type]
    h, p, meas = _small()
    for n in (0, 1):
        with pytest.raises(InvalidParameterError, match=rf"n_replicates: {n}; .*at least 2"):
            amc_replicates(h, p, TOTAL_QUERIES, meas, n, 1)
    with pytest.raises(InvalidParameterError, match="n_replicates: 1"):
        Moments(np.zeros((1, 1)), np.zeros((1, 1)), np.zeros((1, 1)), 1)
    with pytest.raises(InvalidParameterError, match="seed: -1"):
        amc_replicates(h, p, TOTAL_QUERIES, meas, 2, -1)


def test_bad_published_counts_are_refused() -> None:
    h, p, meas = _small()
    bad_nan = p.astype(float)
    bad_nan[2, 0] = np.nan
    with pytest.raises(InvalidParameterError, match=r"nan at index \(2, 0\).*finite"):
        amc_replicates(h, bad_nan, TOTAL_QUERIES, meas, 2, 1)
    bad_neg = p.copy()
    bad_neg[1, 0] = -3
    with pytest.raises(InvalidParameterError, match=r"-3 at index \(1, 0\) is negative"):
        amc_replicates(h, bad_neg, TOTAL_QUERIES, meas, 2, 1)
    with pytest.raises(InvalidParameterError, match=r"12\.5 at index \(0, 0\) is not an integer"):
        amc_replicates(h, p + 2.5, TOTAL_QUERIES, meas, 2, 1)
    with pytest.raises(InvalidParameterError, match=r"shape \(3, 1\).*need \(4, n_cells\)"):
        amc_replicates(h, p[:3], TOTAL_QUERIES, meas, 2, 1)
    with pytest.raises(UnknownNameError, match="Unknown query: 'race'"):
        amc_replicates(h, p, TOTAL_QUERIES, meas, 2, 1, queries=["race"])
    # a float array of whole numbers is accepted as counts
    amc_replicates(h, p.astype(float), TOTAL_QUERIES, meas, 2, 1)


def test_bad_areas_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match=r"shape \(3,\); .*shape \(4,\)"):
        area_map(np.array([0, 1, 1]), 4)
    with pytest.raises(InvalidParameterError, match=r"unit 2 has area -1; .*>= 0"):
        area_map(np.array([0, 1, -1, 0]), 4)
    with pytest.raises(InvalidParameterError, match="dtype float64; need integer"):
        area_map(np.array([0.0, 1.0, 1.0, 0.0]), 4)
    with pytest.raises(InvalidParameterError, match=r"area 'east': unit index 9 outside 0\.\.3"):
        area_map({"east": [0, 9]}, 4)
    with pytest.raises(InvalidParameterError, match="area 'west': need a non-empty"):
        area_map({"west": []}, 4)
    h, p, meas = _small()
    with pytest.raises(InvalidParameterError, match=r"shape \(5,\)"):
        amc_replicates(h, p, TOTAL_QUERIES, meas, 2, 1, areas=np.zeros(5, dtype=int))
    amap = area_map(np.array([1, 0, 1, 1]), 4)
    assert isinstance(amap, AreaMap) and amap.names == ("0", "1")
    np.testing.assert_array_equal(amap.sums(np.array([[1], [2], [3], [4]])), [[2], [8]])
    with pytest.raises(InvalidParameterError, match=r"replicates of shape \(2, 3, 1\)"):
        area_moments(p, np.zeros((2, 3, 1)), amap)


# ---------------------------------------------------------------- the stored study


def test_coverage_table_is_the_stored_study() -> None:
    root = Path(__file__).resolve().parents[2]
    with (root / "benchmarks" / "results" / "amc_coverage.csv").open(encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["queries"] == "all" or r["target"] == "areas"]
    doc = (root / "docs" / "published_error_bars.md").read_text(encoding="utf-8").splitlines()
    start = doc.index(
        "| level | true count | counts | ct | t | bct | cz | z_sd | bias: true / AMC "
        "| AMC variance ÷ true |"
    )
    table = []
    for line in doc[start + 2 :]:
        if not line.startswith("|"):
            break
        table.append([c.strip() for c in line.strip("|").split("|")])
    assert len(table) == len(rows)
    for cells, r in zip(table, rows, strict=True):
        target = "areas (totals)" if r["queries"] == "total" else r["target"]
        assert cells == [
            target,
            r["size_bin"],
            r["counts"],
            *(f"{float(r[f'coverage_{k}']):.3f}" for k in ("ct", "t", "bct", "cz", "z_sd")),
            f"{float(r['bias_true']):+.2f} / {float(r['bias_amc']):+.2f}",
            f"{float(r['var_ratio']):.2f}",
        ], cells
    # the stored studies are the documented size, and the Bureau's interval reaches 90 % in them
    with (root / "benchmarks" / "results" / "amc_coverage_large.csv").open(encoding="utf-8") as f:
        large = list(csv.DictReader(f))
    for study in (rows, large):
        assert all(int(r["published"]) >= 200 and int(r["replicates"]) == 25 for r in study)
        assert min(float(r["coverage_ct"]) for r in study) >= 0.9
