"""Composed EPL of the counts containing one person, on releases whose joint loss is known."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib.epl.composed import composed_epl, level_correlations, path_residuals
from auditlib.exceptions import InvalidParameterError
from auditlib.geography.flaxman import FlaxmanHierarchy, generate_population
from auditlib.mechanisms import DiscreteGaussian, TwoSidedGeometric
from auditlib.simulate.hierarchical import simulate_residuals

TREE = FlaxmanHierarchy(3, 20)  # 20, 400, 8,000 units below the root
LEAVES = np.arange(TREE.n_leaves)
MAPS = [TREE.unit_of_leaf(LEAVES, j) for j in (1, 2, 3)]


def independent_levels(eps: tuple[float, ...], reps: int, seed: int) -> list[np.ndarray]:
    """Independent G(ε_j) noise on every unit of levels 1..3 (each level its own ε-DP release)."""
    g = np.random.default_rng(seed)
    return [
        TwoSidedGeometric(e).rvs((reps, TREE.n_units(j)), g).astype(np.float64)
        for j, e in zip((1, 2, 3), eps, strict=True)
    ]


def test_independent_levels_compose_to_the_sum_of_their_losses() -> None:
    # three independent ε_j-DP levels: the joint release of one person's three counts has loss
    # exactly ε_1 + ε_2 + ε_3 (basic composition is tight for independent pure-DP noise)
    eps = (0.1, 0.2, 0.3)
    c = composed_epl(independent_levels(eps, 100, 1), MAPS, seed=2)
    assert c.status == "ok" and c.n_paths == 100 * 8000
    assert c.epl_sum == pytest.approx(0.6, rel=0.08)
    for got, want in zip(c.per_level, eps, strict=True):
        assert got == pytest.approx(want, rel=0.2)
    assert c.ci_low <= 0.6 <= c.ci_high
    assert not c.ci_low <= 0.6 * 1.3 <= c.ci_high and not c.ci_low <= 0.6 * 0.7 <= c.ci_high
    assert c.max_abs_correlation < 0.01  # sd of a correlation of 8e5 pairs ~ 0.0011
    assert c.dependence_factor == pytest.approx(1.0, abs=0.01)
    # averaging independent Laplace-like levels hides their tails: a lower bound, well below
    assert c.epl_projection < 0.8 * c.epl_sum


def test_rdpc_is_about_eps_over_levels_each_but_eps_composed() -> None:
    # Flaxman 2019 §2.2 / Fig. 1: RDPC spends ε/(J+1) per level; a person is counted at every level
    pop = generate_population(200_000, 3, 50, seed=7)  # C = 15, 3,375 leaves
    eps = 0.2
    res = simulate_residuals(pop, "rdpc", eps, seed=4, replicates=200, dtype=np.float64)
    leaves = np.arange(pop.hierarchy.n_leaves)
    maps = [pop.hierarchy.unit_of_leaf(leaves, j) for j in range(4)]
    c = composed_epl([res[f"L{j}"] for j in range(4)], maps, seed=3)
    assert c.per_level[3] == pytest.approx(eps / 4, rel=0.2)  # the leaves: ≈ ε/4
    assert max(c.per_level) < 0.45 * eps  # no level alone shows more than ~ε/4 (+ small-n bias)
    assert 0.85 * eps < c.epl_sum < 1.35 * eps  # ≈ ε composed (the root: 200 residuals, biased up)
    # raking lets a parent's noise into its children: small positive correlations of adjacent
    # levels only; the Gaussian dependence factor stays near 1, so the sum is the right reading
    corr = c.correlation
    assert 0.0 < corr[2, 3] < 0.15 and abs(corr[0, 3]) < 0.05
    assert 0.85 < c.dependence_factor < 1.1


def test_dependence_that_cancels_noise_is_flagged() -> None:
    # level B = −(level A) + small noise: each level alone looks noisy, but their sum reveals the
    # shift through the small noise; the joint loss is far above the sum of the per-level losses
    g = np.random.default_rng(5)
    n = 200_000
    a = DiscreteGaussian(100.0).rvs(n, g).astype(np.float64)
    b = -a + DiscreteGaussian(9.0).rvs(n, g)
    ident = np.arange(n)
    c = composed_epl([a[None, :], b[None, :]], [ident, ident], seed=1)
    assert c.correlation[0, 1] == pytest.approx(-np.sqrt(100 / 109), abs=0.005)
    assert c.dependence_factor > 10
    assert c.epl_projection > 1.5 * c.epl_sum  # the documented flag: projection above the sum


def test_the_same_noise_published_twice_costs_one_level() -> None:
    # identical residuals at two levels: the joint loss is one level's; the sum counts it twice,
    # which the dependence factor (pseudo-inverse of a singular covariance) says: 1/2
    r = TwoSidedGeometric(0.3).rvs((1, 100_000), np.random.default_rng(8)).astype(np.float64)
    ident = np.arange(100_000)
    c = composed_epl([r, r], [ident, ident], n_boot=None)
    assert c.correlation[0, 1] == pytest.approx(1.0)
    assert c.dependence_factor == pytest.approx(0.5, rel=1e-6)
    assert c.epl_projection == pytest.approx(c.per_level[0], rel=1e-9)
    assert c.epl_sum == pytest.approx(2 * c.per_level[0])


def test_paths_and_correlations_against_brute_force() -> None:
    levels = independent_levels((0.5, 0.5, 0.5), 3, 9)
    p = path_residuals(levels, MAPS)
    assert p.shape == (3 * 8000, 3)
    for row in (0, 7999, 8000 + 4321, 2 * 8000 + 17):
        r, leaf = divmod(row, 8000)
        want = [levels[0][r, leaf // 400], levels[1][r, leaf // 20], levels[2][r, leaf]]
        np.testing.assert_array_equal(p[row], want)
    np.testing.assert_allclose(level_correlations(p), np.corrcoef(p, rowvar=False), atol=1e-12)


def test_invariant_level_gives_infinite_composed_loss() -> None:
    levels = independent_levels((0.5, 0.5, 0.5), 20, 3)
    levels[1] = np.zeros_like(levels[1])
    c = composed_epl(levels, MAPS, n_boot=None)
    assert c.status == "invariant" and c.epl_sum == np.inf


def test_bad_inputs_name_the_problem() -> None:
    levels = independent_levels((0.5, 0.5, 0.5), 2, 3)
    with pytest.raises(InvalidParameterError, match="leaf maps"):
        composed_epl(levels, MAPS[:2])
    with pytest.raises(InvalidParameterError, match="level 1"):
        composed_epl([levels[0], levels[1][:1], levels[2]], MAPS)
    bad = [m.copy() for m in MAPS]
    bad[0][5] = 99
    with pytest.raises(InvalidParameterError, match=r"outside 0\.\.19"):
        composed_epl(levels, bad)
    nan = [lv.copy() for lv in levels]
    nan[2][0, 0] = np.nan
    with pytest.raises(InvalidParameterError, match="NaN"):
        composed_epl(nan, MAPS)
