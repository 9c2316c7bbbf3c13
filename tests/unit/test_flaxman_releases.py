"""Flaxman's synthetic hierarchy and its GDPC / RDPC / ADPC releases, against exact laws."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from auditlib.exceptions import InvalidParameterError
from auditlib.geography.flaxman import (
    FlaxmanHierarchy,
    FlaxmanPopulation,
    children_per_unit,
    generate_population,
    people_from_locations,
)
from auditlib.mechanisms import TwoSidedGeometric
from auditlib.simulate.hierarchical import (
    CountTree,
    adpc,
    gdpc,
    rake,
    rdpc,
    release,
    residual_block,
    simulate_residuals,
)
from auditlib.simulate.neighbours import (
    NeighbourPair,
    add_person,
    direct_samples,
    move_between_areas,
    move_person,
    remove_person,
)

POP = generate_population(200_000, 3, 50, seed=7)  # C = 15, 3,375 leaves


# --- the generator -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "j", "mu", "c"),
    [(10**6, 3, 100, 21), (10**6, 3, 1000, 10), (10**6, 2, 100, 100), (8, 3, 1, 2), (7, 3, 1, 1)],
)
def test_children_per_unit_is_the_exact_floor(n: int, j: int, mu: float, c: int) -> None:
    assert children_per_unit(n, j, mu) == c


def test_total_counts_are_consistent_and_cover_every_unit() -> None:
    h = POP.hierarchy
    assert h == FlaxmanHierarchy(3, 15)
    tc = POP.total_counts()
    assert [t.size for t in tc] == [1, 15, 225, 3375]
    for j, t in enumerate(tc):
        assert int(t.sum()) == 200_000
        if j:
            np.testing.assert_array_equal(np.bincount(h.parent(j), weights=t), tc[j - 1])
    # direct grouping of the N×J matrix D, as in the paper's definition of TC
    d = POP.locations
    assert d.shape == (200_000, 3) and d.min() == 0 and d.max() == 14
    mask = (d[:, 0] == 3) & (d[:, 1] == 7)
    assert tc[2][3 * 15 + 7] == mask.sum()
    assert tc[3][(3 * 15 + 7) * 15 + 2] == (mask & (d[:, 2] == 2)).sum()
    again = people_from_locations(h, d)
    np.testing.assert_array_equal(again.leaf, POP.leaf)


def test_locations_are_uniform_and_independent_across_levels() -> None:
    d = POP.locations
    for j in range(3):
        counts = np.bincount(d[:, j], minlength=15)
        assert stats.chisquare(counts).pvalue > 1e-4
    pair = np.bincount(d[:, 0] * 15 + d[:, 2], minlength=225)
    assert stats.chisquare(pair).pvalue > 1e-4


def test_generator_is_deterministic_by_seed() -> None:
    a = generate_population(10_000, 2, 10, seed=3)
    b = generate_population(10_000, 2, 10, seed=3)
    c = generate_population(10_000, 2, 10, seed=4)
    np.testing.assert_array_equal(a.leaf, b.leaf)
    assert not np.array_equal(a.leaf, c.leaf)
    d = generate_population(10_000, 2, 10, rng=np.random.default_rng(3))
    assert d.n_people == 10_000


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"n_people": 0, "levels": 3, "mean_per_location": 100}, "N (n_people): 0"),
        ({"n_people": -5, "levels": 3, "mean_per_location": 100}, "-5"),
        ({"n_people": 1000, "levels": 3, "mean_per_location": 0}, "mu (mean_per_location): 0"),
        ({"n_people": 1000, "levels": 3, "mean_per_location": -2.5}, "-2.5"),
        ({"n_people": 1000, "levels": 0, "mean_per_location": 10}, "J (levels): 0"),
        ({"n_people": 10, "levels": 2, "mean_per_location": 100}, "N=10, mu=100"),
    ],
)
def test_bad_population_inputs_name_the_value(kwargs: dict[str, float], text: str) -> None:
    with pytest.raises(InvalidParameterError, match=text.replace("(", r"\(").replace(")", r"\)")):
        generate_population(**kwargs, seed=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("eps", [0.0, -0.1, float("nan"), float("inf")])
def test_bad_epsilon_names_the_value(eps: float) -> None:
    tree = CountTree.from_population(POP)
    g = np.random.default_rng(0)
    for algo in ("gdpc", "rdpc", "adpc"):
        with pytest.raises(InvalidParameterError, match="epsilon"):
            release(tree, algo, eps, g)
    with pytest.raises(InvalidParameterError, match=str(eps)):
        gdpc(tree.leaf_counts, eps, g)


def test_bad_algorithm_runs_and_leaf_codes() -> None:
    tree = CountTree.from_population(POP)
    g = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match="'tdpc'"):
        release(tree, "tdpc", 1.0, g)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="P \\(n_runs\\): 0"):
        adpc(tree.leaf_counts, 1.0, 0, g)
    with pytest.raises(InvalidParameterError, match="outside"):
        FlaxmanPopulation(FlaxmanHierarchy(2, 3), np.array([0, 9]))


# --- GDPC ------------------------------------------------------------------------------------------


def _geometric_chi2_pvalue(residuals: np.ndarray, eps: float, k_max: int) -> float:
    """Chi-square of residuals against G(eps) on bins -k_max..k_max plus the two tails."""
    law = TwoSidedGeometric(eps)
    k = np.arange(-k_max, k_max + 1)
    r = np.asarray(residuals, dtype=np.int64)
    obs = np.bincount(np.clip(r, -k_max - 1, k_max + 1) + k_max + 1, minlength=2 * k_max + 3)
    exp = np.concatenate([law.cdf([-k_max - 1]), law.pmf(k), law.sf([k_max])]) * r.size
    return float(stats.chisquare(obs, exp).pvalue)


def test_gdpc_residuals_follow_the_geometric_pmf_and_a_30pc_wrong_epsilon_fails() -> None:
    eps = 0.4
    res = simulate_residuals(POP, "gdpc", eps, seed=11, replicates=30)
    assert list(res) == ["L3"]
    r = res["L3"].ravel()
    assert r.size == 30 * 3375
    np.testing.assert_array_equal(r, np.round(r))  # integer residuals
    assert _geometric_chi2_pvalue(r, eps, 15) > 1e-3
    assert _geometric_chi2_pvalue(r, 1.3 * eps, 15) < 1e-8
    assert _geometric_chi2_pvalue(r, 0.7 * eps, 15) < 1e-8


# --- ADPC ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("eps", "p"), [(0.5, 4), (0.2, 2)])
def test_adpc_residual_variance_is_var_g_eps_over_p_over_p(eps: float, p: int) -> None:
    res = simulate_residuals(POP, "adpc", eps, seed=12, replicates=20, n_runs=p, dtype=np.float64)
    r = res["L3"].ravel()
    np.testing.assert_array_equal(r * p, np.round(r * p))  # on the lattice Z/P
    expected = TwoSidedGeometric(eps / p).var() / p
    var = float(np.mean(r**2))  # the mean is 0 exactly, so this is unbiased
    se = float(np.sqrt((np.mean(r**4) - var**2) / r.size))
    assert abs(var - expected) < 4 * se
    assert abs(float(np.mean(r))) < 4 * np.sqrt(expected / r.size)


def test_adpc_with_one_run_is_gdpc() -> None:
    tc = POP.leaf_counts()
    a = adpc(tc, 0.3, 1, np.random.default_rng(5))
    b = gdpc(tc, 0.3, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)


# --- RDPC ------------------------------------------------------------------------------------------


def _irregular_tree(rng: np.random.Generator) -> CountTree:
    """A 3-level tree with uneven fan-outs and many empty leaves."""
    parents = []
    n_up = 1
    for fan_max in (6, 9, 12):
        sizes = rng.integers(1, fan_max, size=n_up)
        parents.append(np.repeat(np.arange(n_up), sizes))
        n_up = int(sizes.sum())
    leaves = rng.poisson(3.0, n_up) * (rng.random(n_up) < 0.5)
    counts = [leaves]
    for par in reversed(parents):
        counts.append(np.bincount(par, weights=counts[-1]).astype(np.int64))
    return CountTree(tuple(counts[::-1]), tuple(parents))


@pytest.mark.parametrize("which", ["flaxman", "irregular"])
def test_rdpc_children_sum_to_the_parent_at_every_level(which: str) -> None:
    tree = (
        CountTree.from_population(POP)
        if which == "flaxman"
        else _irregular_tree(np.random.default_rng(1))
    )
    for s in range(5):
        rel = rdpc(tree, 0.05, np.random.default_rng(s))
        assert sorted(rel.dp) == list(range(tree.levels + 1))
        for j in range(1, tree.levels + 1):
            sums = np.bincount(tree.parents[j - 1], weights=rel.dp[j])
            np.testing.assert_allclose(sums, rel.dp[j - 1], rtol=1e-12, atol=1e-9)
        if which == "irregular":  # small families, big noise: equal splits do happen
            assert sum(rel.n_equal_splits.values()) > 0


def test_rdpc_root_is_n_plus_geometric_at_eps_over_j_plus_1() -> None:
    tree = CountTree.from_population(POP)
    res = simulate_residuals(tree, "rdpc", 2.0, seed=13, replicates=4000, dtype=np.float64)
    assert list(res) == ["L0", "L1", "L2", "L3"]
    assert _geometric_chi2_pvalue(res["L0"].ravel(), 0.5, 8) > 1e-3


def test_rake_splits_nonpositive_families_equally() -> None:
    noisy = np.array([3.0, 1.0, -3.0, 1.0, 2.0, -2.0, 4.0])
    parent = np.array([0, 0, 1, 1, 2, 2, 3])
    out, n_bad = rake(noisy, parent, np.array([8.0, 6.0, 5.0, -1.0]))
    np.testing.assert_allclose(out, [6.0, 2.0, 3.0, 3.0, 2.5, 2.5, -1.0])
    assert n_bad == 2
    with pytest.raises(InvalidParameterError, match="no child"):
        rake(noisy, parent, np.zeros(5))


# --- keyed determinism -----------------------------------------------------------------------------


@pytest.mark.parametrize("algo", ["gdpc", "rdpc", "adpc"])
def test_replicates_are_keyed_chunks_reproduce_one_run(algo: str) -> None:
    p = 4 if algo == "adpc" else None
    whole = simulate_residuals(POP, algo, 0.3, seed=21, replicates=6, n_runs=p)  # type: ignore[arg-type]
    again = simulate_residuals(POP, algo, 0.3, seed=21, replicates=6, n_runs=p)  # type: ignore[arg-type]
    lo = simulate_residuals(POP, algo, 0.3, seed=21, replicates=range(0, 2), n_runs=p)  # type: ignore[arg-type]
    hi = simulate_residuals(POP, algo, 0.3, seed=21, replicates=range(2, 6), n_runs=p)  # type: ignore[arg-type]
    other = simulate_residuals(POP, algo, 0.3, seed=22, replicates=6, n_runs=p)  # type: ignore[arg-type]
    for j, arr in whole.items():
        assert arr.dtype == np.float32 and arr.flags.c_contiguous
        np.testing.assert_array_equal(arr, again[j])
        np.testing.assert_array_equal(arr, np.concatenate([lo[j], hi[j]]))
        if j != "L0":
            assert not np.array_equal(arr, other[j])
            assert not np.array_equal(arr[0], arr[1])


# --- neighbouring databases ------------------------------------------------------------------------


def _dense_difference(pair: NeighbourPair, level: int) -> dict[int, int]:
    t_d, t_p = pair.trees()
    diff = t_p.counts[level] - t_d.counts[level]
    return {int(u): int(diff[u]) for u in np.flatnonzero(diff)}


def test_flaxman_move_from_area_0_to_area_1001() -> None:
    pair = move_between_areas(POP)
    ch = pair.change
    assert (ch.kind, ch.from_leaf, ch.to_leaf) == ("move", 0, 1001)
    assert POP.leaf[ch.person] == 0 and pair.d_prime.leaf[ch.person] == 1001
    changed = np.flatnonzero(pair.d.leaf != pair.d_prime.leaf)
    np.testing.assert_array_equal(changed, [ch.person])
    # leaf 1001 = (4, 6, 11) in base 15: different units at every level below the root
    assert pair.count_difference(3) == {0: -1, 1001: 1}
    assert pair.count_difference(1) == {0: -1, 4: 1}
    assert pair.count_difference(0) == {}
    for j in range(4):
        assert pair.count_difference(j) == _dense_difference(pair, j)


@pytest.mark.parametrize("kind", ["add", "remove", "move_within"])
def test_add_remove_and_local_moves_change_counts_by_one(kind: str) -> None:
    if kind == "add":
        pair = add_person(POP, 17)
        assert pair.d_prime.n_people == POP.n_people + 1
    elif kind == "remove":
        pair = remove_person(POP, 5)
        assert pair.d_prime.n_people == POP.n_people - 1
    else:  # a move between two leaves of one parent changes nothing above the leaves
        leaf = int(POP.leaf[9])
        sibling = leaf + 1 if leaf % 15 < 14 else leaf - 1
        pair = move_person(POP, 9, sibling)
        assert pair.count_difference(2) == {}
    assert pair.d_prime.hierarchy == POP.hierarchy
    for j in range(4):
        diff = pair.count_difference(j)
        assert diff == _dense_difference(pair, j)
        assert all(abs(v) == 1 for v in diff.values())


def test_bad_neighbour_requests_name_the_value() -> None:
    with pytest.raises(InvalidParameterError, match="person: 200000"):
        move_person(POP, 200_000, 3)
    with pytest.raises(InvalidParameterError, match="already lives in leaf"):
        move_person(POP, 0, int(POP.leaf[0]))
    with pytest.raises(InvalidParameterError, match="leaf: 3375"):
        add_person(POP, 3375)
    empty = FlaxmanPopulation(FlaxmanHierarchy(2, 3), np.array([1, 2, 2]))
    with pytest.raises(InvalidParameterError, match="from_leaf: 0; nobody"):
        move_between_areas(empty, 0, 4)


def test_direct_samples_see_the_moved_person() -> None:
    pair = move_between_areas(POP)
    s = direct_samples(pair, "gdpc", 1.0, level=3, unit=0, replicates=1500, seed=31)
    assert s.truth_d == POP.leaf_counts()[0]
    e_d, e_p = s.errors
    law = TwoSidedGeometric(1.0)
    se = law.std() * np.sqrt(2 / 1500)
    assert abs(float(e_p.mean() - e_d.mean()) + 1.0) < 4 * se  # unit 0 lost one person in D'
    assert _geometric_chi2_pvalue(e_d, 1.0, 5) > 1e-3
    assert _geometric_chi2_pvalue(e_p + 1, 1.0, 5) > 1e-3
    again = direct_samples(pair, "gdpc", 1.0, level=3, unit=0, replicates=1500, seed=31)
    np.testing.assert_array_equal(again.dp_d_prime, s.dp_d_prime)
    r = direct_samples(pair, "rdpc", 1.0, level=1, unit=0, replicates=5, seed=1)
    assert r.dp_d.shape == r.dp_d_prime.shape == (5,)
    with pytest.raises(InvalidParameterError, match="level: 1"):
        direct_samples(pair, "gdpc", 1.0, level=1, unit=0, replicates=5, seed=1)


def test_residual_block_has_the_store_layout() -> None:
    blk = residual_block(POP, "rdpc", 0.3, level=2, seed=21, replicates=range(2, 6), query_id=3)
    assert blk.residual.shape == (4, 225) and blk.residual.dtype == np.float32
    np.testing.assert_array_equal(blk.truth, POP.total_counts()[2])
    assert blk.truth.dtype == np.int32 and (blk.query_index == 3).all()
    np.testing.assert_array_equal(blk.unit_index, np.arange(225))
    whole = simulate_residuals(POP, "rdpc", 0.3, seed=21, replicates=6)
    np.testing.assert_array_equal(blk.residual, whole["L2"][2:6])
    with pytest.raises(InvalidParameterError, match="level: 2"):
        residual_block(POP, "gdpc", 0.3, level=2, seed=1)
