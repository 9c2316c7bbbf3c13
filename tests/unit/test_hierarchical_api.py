"""Flaxman's releases as a library: residuals come back by level name, and ADPC's P is never a
silent default."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography.flaxman import generate_population
from auditlib.simulate.direct import Hierarchical
from auditlib.simulate.hierarchical import CountTree, release, residual_block, simulate_residuals

POP = generate_population(20_000, 2, 50, seed=5)  # C = 20, 400 leaves


def test_residuals_are_keyed_by_level_name():
    gd = simulate_residuals(POP, "gdpc", 0.5, seed=1, replicates=3)
    assert list(gd) == ["L2"] and gd["L2"].shape == (3, 400)
    rd = simulate_residuals(POP, "rdpc", 0.5, seed=1, replicates=3)
    assert list(rd) == ["L0", "L1", "L2"]
    tc = POP.total_counts()
    named = CountTree(tuple(tc), CountTree.from_population(POP).parents, ("all", "area", "leaf"))
    again = simulate_residuals(named, "rdpc", 0.5, seed=1, replicates=3)
    assert list(again) == ["all", "area", "leaf"]
    for a, b in zip(rd.values(), again.values(), strict=True):
        np.testing.assert_array_equal(a, b)  # the names change nothing else
    blk = residual_block(named, "rdpc", 0.5, level="area", seed=1, replicates=3)
    np.testing.assert_array_equal(blk.residual, again["area"])
    np.testing.assert_array_equal(
        residual_block(named, "rdpc", 0.5, level=1, seed=1, replicates=3).residual, blk.residual
    )
    with pytest.raises(UnknownNameError, match="'county'; the tree has all, area, leaf"):
        residual_block(named, "rdpc", 0.5, level="county", seed=1)
    with pytest.raises(InvalidParameterError, match="one distinct name per level"):
        CountTree(tuple(tc), named.parents, ("all", "all", "leaf"))


def test_spine_tree_names_its_levels():
    from auditlib.geography import generate_spine, tallies_2020

    spine = generate_spine(3, totals={"US": tallies_2020()["US"].scaled(0.0002)})
    tree = CountTree.from_spine(spine)
    assert tree.names == ("US", "State", "County", "Tract", "Block_Group", "Block")
    res = simulate_residuals(tree, "gdpc", 1.0, seed=2, replicates=2)
    assert list(res) == ["Block"] and res["Block"].shape[1] == spine.block_population.size


def test_adpc_needs_its_p():
    tree = CountTree.from_population(POP)
    g = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match=r"Missing P \(n_runs\) of ADPC.*pass n_runs"):
        simulate_residuals(POP, "adpc", 0.5, seed=1, replicates=2)
    with pytest.raises(InvalidParameterError, match=r"Missing P \(n_runs\) of ADPC"):
        release(tree, "adpc", 0.5, g)
    with pytest.raises(InvalidParameterError, match=r"Missing P \(n_runs\) of ADPC"):
        Hierarchical("adpc", 0.5)
    p2 = simulate_residuals(POP, "adpc", 0.5, seed=1, replicates=2, n_runs=2)["L2"]
    np.testing.assert_allclose(p2 * 2, np.round(p2 * 2))  # on the lattice Z/2
    assert (p2 != np.round(p2)).any()  # and not on Z: P = 2 was used
    assert Hierarchical("adpc", 0.5, 3).n_runs == 3
    simulate_residuals(POP, "gdpc", 0.5, seed=1, replicates=2)  # P means nothing to GDPC/RDPC
