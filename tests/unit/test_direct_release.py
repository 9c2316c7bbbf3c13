"""Direct samples of any release on (D, D′): reproducible, independent between D and D′, with power.

References: the two-sided geometric's exact ratio P(e ≤ 0 | D) / P(e ≤ 0 | D′) = e^ε for a count
moved by +1 (Flaxman 2019 §2.2, P(k) ∝ e^{−ε|k|}); TopDown run state by state with
:func:`auditlib.simulate.topdown.topdown` itself (the cut to one state must not change the value);
SA4's invariant (a county of one block releases its true total).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError
from auditlib.geography.schema import schema
from auditlib.geography.spine import generate_spine, tallies_2020
from auditlib.geography.synthetic import PopulationParams, SyntheticHierarchy
from auditlib.simulate.direct import (
    Allocation,
    Hierarchical,
    Stratified,
    TopDown,
    release_range,
    release_samples,
    released_values,
)
from auditlib.simulate.neighbours_hist import HistogramDatabase, add_person, move_person
from auditlib.simulate.topdown import topdown


def _geometric_epsilon_hat(
    eps_release: float, histograms: HistogramDatabase
) -> tuple[float, float]:
    pair = add_person(histograms, 2, "white")  # unit 2's total: 20 -> 21
    s = release_samples(
        pair,
        Hierarchical("gdpc", eps_release),
        level="block",
        unit=2,
        replicates=40_000,
        seed=5,
    )
    e_d, e_p = s.errors
    p, q = np.mean(e_d <= 0), np.mean(e_p <= 0)
    se = math.sqrt((1 - p) / (p * e_d.size) + (1 - q) / (q * e_p.size))
    return math.log(p / q), se


def test_gdpc_direct_estimate_recovers_epsilon(histograms: HistogramDatabase) -> None:
    est, se = _geometric_epsilon_hat(1.0, histograms)
    assert abs(est - 1.0) < 5 * se  # exact ratio e^ε
    wrong, se_w = _geometric_epsilon_hat(1.3, histograms)  # a release at another ε fails the check
    assert abs(wrong - 1.0) > 5 * se_w


def test_reproducible_and_independent(histograms: HistogramDatabase) -> None:
    pair = move_person(histograms, 0, "white", 4, "black")
    r = Hierarchical("adpc", 0.5, n_runs=4)
    a = release_samples(pair, r, level=2, unit=1, replicates=3000, seed=1, chunk=700)
    b = release_samples(pair, r, level=2, unit=1, replicates=3000, seed=1, chunk=700)
    np.testing.assert_array_equal(a.dp_d, b.dp_d)
    np.testing.assert_array_equal(a.dp_d_prime, b.dp_d_prime)
    c = release_samples(pair, r, level=2, unit=1, replicates=3000, seed=2, chunk=700)
    assert not np.array_equal(a.dp_d, c.dp_d)
    # unit 1 is untouched by the move: D and D′ give the same law, from independent draws
    assert a.truth_d == a.truth_d_prime == 30
    assert not np.array_equal(a.dp_d, a.dp_d_prime)
    assert abs(np.corrcoef(a.dp_d, a.dp_d_prime)[0, 1]) < 4 / math.sqrt(3000)
    assert stats.ks_2samp(a.dp_d, a.dp_d_prime).pvalue > 1e-3
    assert np.all(np.round(a.dp_d * 4) == a.dp_d * 4)  # ADPC on ℤ/P
    # the changed unit (0: its total loses one) is seen by the D′ runs only
    d = release_samples(pair, r, level=2, unit=0, replicates=3000, seed=1)
    assert (d.truth_d, d.truth_d_prime) == (60, 59)


def test_rdpc_allocation_and_stratified(histograms: HistogramDatabase) -> None:
    pair = add_person(histograms, 4, "black")
    g = np.random.default_rng(3)
    rd = released_values(Hierarchical("rdpc", 2.0), histograms, 300, g, level="state", unit=1)
    assert abs(rd.mean() - 120) < 5 * rd.std() / math.sqrt(300)
    s = release_samples(
        pair, Allocation(4.0, "nonnegative"), level=0, unit=1, replicates=20_000, seed=0
    )
    assert s.dp_d.min() >= 0 and np.all(s.dp_d == np.round(s.dp_d))
    assert s.dp_d_prime.mean() - s.dp_d.mean() == pytest.approx(1.0, abs=0.1)
    sa3 = released_values(
        Stratified("sa3", 1.0), histograms, 2000, g, level=2, unit=4, query="detailed", cell=1
    )
    assert sa3.min() >= 0 and abs(np.median(sa3) - 40) <= 1
    # SA4: county totals are invariant: block 2 is alone in its county, blocks 3 and 4 share one
    np.testing.assert_array_equal(
        released_values(Stratified("sa4", 1.0), histograms, 50, g, level=2, unit=2), 20.0
    )
    b3 = released_values(Stratified("sa4", 1.0), histograms, 2000, g, level=2, unit=3)
    assert b3.min() >= 0 and b3.max() <= 120 and b3.std() > 0
    assert abs(np.median(b3) - 70) <= 2


def test_topdown_runs_the_units_state_only() -> None:
    t = tallies_2020()["US"].scaled(0.0003)
    spine = generate_spine(4, totals={"US": t})
    nation = HistogramDatabase.from_spine(spine)
    st = 2
    one = HistogramDatabase.from_spine(spine, state=st)
    measured = TopDown.of(
        [[("total", 1.0)], [("total", 2.0)], [("total", 2.0)], [("total", 4.0)], [("total", 8.0)]]
    )
    # the first tract of state `st` in the nation's numbering
    tract_state = spine.state_of("Tract")
    tract = int(np.flatnonzero(tract_state == st)[0])
    a = released_values(measured, nation, 50, seeds.rng(1, 9), level="Tract", unit=tract)
    b = released_values(measured, one, 50, seeds.rng(1, 9), level="Tract", unit=0)
    np.testing.assert_array_equal(a, b)
    # the copies are independent runs: their law is that of separate topdown() calls
    n = 300
    copies = released_values(measured, one, n, seeds.rng(2, 9), level="Tract", unit=0)
    sep = np.array(
        [
            topdown(
                one.hierarchy,
                one.histograms,
                {"total": np.ones((1, 1))},
                measured.measured,
                [seeds.rng(3, r)] * 5,
            ).dp[2][0, 0]
            for r in range(n)
        ]
    )
    assert stats.ks_2samp(copies, sep).pvalue > 1e-3
    assert np.all(copies >= 0) and np.all(copies == np.round(copies))
    truth = one.query_counts("Tract")[0, 0]
    assert abs(copies.mean() - truth) < 4


def test_bad_targets(histograms: HistogramDatabase) -> None:
    g = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match="gdpc releases the blocks"):
        released_values(Hierarchical("gdpc", 1.0), histograms, 5, g, level="state", unit=0)
    with pytest.raises(InvalidParameterError, match="Invalid unit 9 at 'block'"):
        released_values(Allocation(1.0), histograms, 5, g, level="block", unit=9)
    with pytest.raises(InvalidParameterError, match="Invalid cell 2 of query 'detailed'"):
        released_values(
            Allocation(1.0), histograms, 5, g, level=2, unit=0, query="detailed", cell=2
        )
    with pytest.raises(InvalidParameterError, match="Unknown level 'Block'"):
        released_values(Allocation(1.0), histograms, 5, g, level="Block", unit=0)
    with pytest.raises(InvalidParameterError, match="Invalid n: 0"):
        released_values(Allocation(1.0), histograms, 0, g, level=0, unit=0)
    with pytest.raises(InvalidParameterError, match="sa3 releases each block"):
        released_values(Stratified("sa3", 1.0), histograms, 5, g, level=0, unit=0)
    pair = add_person(histograms, 0, 0)
    with pytest.raises(InvalidParameterError, match="Invalid replicates: 0"):
        release_samples(pair, Allocation(1.0), level=0, unit=0, replicates=0, seed=1)


def test_pl94_synthetic_topdown_cell() -> None:
    h = SyntheticHierarchy(("State", "County", "Block"), (2, 3), 1)
    db = HistogramDatabase.from_synthetic(h, PopulationParams(seed=2), 1, schema("pl94"))
    b, c = map(int, np.argwhere(db.histograms > 0)[0])
    pair = move_person(db, b, c, 5, c)
    m = TopDown.of([[("total", 1.0), ("detailed", 4.0)]] * 3)
    s = release_samples(
        pair, m, level="County", unit=0, query="votingage", cell=1, replicates=60, seed=3
    )
    q = db.schema.cell_query_index("votingage")[c]
    moved_out = q == 1
    assert s.truth_d - s.truth_d_prime == int(moved_out)
    assert np.all(s.dp_d >= 0)


@pytest.mark.parametrize(
    "release",
    [Hierarchical("adpc", 0.7, 4), Stratified("sa4", 0.5), Allocation(3.0, "nonnegative")],
    ids=["adpc", "sa4", "allocation"],
)
def test_ranges_in_any_split_join_into_one_run(
    histograms: HistogramDatabase, release: object
) -> None:
    """A task's range is cut from whole stream chunks: 1 range or 3 misaligned ones, same values."""
    pair = move_person(histograms, 0, "white", 1)
    kw = {"level": "block", "unit": 1, "query": "detailed", "cell": 0, "replicates": 70, "seed": 3}
    if isinstance(release, Allocation):
        kw["query"] = "total"
    one = release_samples(pair, release, chunk=30, **kw)  # type: ignore[arg-type]
    parts = [
        release_range(pair, release, start=a, stop=b, chunk=30, **kw)  # type: ignore[arg-type]
        for a, b in ((0, 25), (25, 61), (61, 70))
    ]
    np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), one.dp_d)
    np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), one.dp_d_prime)
    assert not np.array_equal(one.dp_d[:30], one.dp_d[30:60])  # the stream chunks differ
    with pytest.raises(InvalidParameterError, match=r"range 60\.\.80"):
        release_range(pair, release, start=60, stop=80, chunk=30, **kw)  # type: ignore[arg-type]
