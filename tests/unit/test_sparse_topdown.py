"""Sparse TopDown on the PL94 production schema: every query measured at every level, children
summing to parents in every cell, non-negative integers, the state total and the no-unit-no-person
constraint exact; the least-squares step agrees with the dense solver."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError
from auditlib.geography.schema import schema
from auditlib.geography.sparse_histograms import (
    invariant_violations,
    may_hold,
    people_per_unit_type,
)
from auditlib.simulate import sparse_topdown as sparse_topdown_module
from auditlib.simulate.sparse_topdown import _Fit, noise_rngs, sparse_topdown
from auditlib.simulate.wls import solve_wls_normal
from tests.unit._pl94_state import pl94_release, pl94_state

SCH = schema("pl94_production")


@pytest.fixture(scope="module")
def state():  # type: ignore[no-untyped-def]
    return pl94_state(0.05, 16_000_000)


@pytest.fixture(scope="module")
def release(state):  # type: ignore[no-untyped-def]
    return pl94_release(state)


def test_every_query_is_measured_at_every_level(state) -> None:  # type: ignore[no-untyped-def]
    _, hierarchy, _, measured = state
    assert hierarchy.levels == ("State", "County", "Tract", "Block_Group", "Block")
    for level in measured:
        assert sorted(q for q, _ in level) == sorted(
            SCH.canonical_query(q)
            for q in (
                "total", "cenrace", "hispanic", "votingage", "hhinstlevels", "hhgq",
                "hispanic * cenrace", "votingage * cenrace", "votingage * hispanic",
                "votingage * hispanic * cenrace", "detailed",
            )
        )  # fmt: skip


def test_release_is_consistent_non_negative_and_keeps_the_invariants(state, release) -> None:  # type: ignore[no-untyped-def]
    _, hierarchy, pop, _ = state
    total = pop.pl94_invariants.state_total
    units = pop.pl94_invariants.units.astype(np.int64)
    for i in range(len(hierarchy.levels)):
        dp, truth = release.dp[i], release.truth[i]
        assert dp.counts.min() > 0 and dp.counts.dtype.kind == "i"
        assert dp.totals().sum() == total == truth.totals().sum()
        if i:  # children sum to their parent in every cell
            up = dp.aggregate(hierarchy.parents[i - 1], release.dp[i - 1].n_units)
            np.testing.assert_array_equal(up.cells, release.dp[i - 1].cells)
            np.testing.assert_array_equal(up.counts, release.dp[i - 1].counts)
    # nobody in a unit type a block has no units of; the bounds as the DAS's constraints
    people = people_per_unit_type(release.dp[-1])
    assert (people[units == 0] == 0).all()
    got = invariant_violations(release.dp[-1], pop.pl94_invariants)
    assert got["state_total"] == 0 and got["gq_upper"] == 0
    # noise was added: the released blocks differ from the truth
    d, t = release.answers(len(hierarchy.levels) - 1, "total")
    assert (d != t).any() and np.abs(d - t).mean() < 10


def test_the_state_fit_is_the_dense_least_squares_solution(state) -> None:  # type: ignore[no-untyped-def]
    _, _, pop, measured = state
    truth = pop.pl94.aggregate(np.zeros(pop.pl94.n_units, dtype=np.int64), 1)
    units = pop.pl94_invariants.units.sum(axis=0, keepdims=True).astype(np.int32)
    cell = np.arange(SCH.n_cells, dtype=np.int64)
    keep = may_hold(cell, np.zeros_like(cell), units, "pl94_production")
    total = float(truth.totals()[0])
    fit = _Fit(np.zeros(int(keep.sum()), np.int64), cell[keep], np.zeros(int(keep.sum()), np.int64),
               np.array([total]))  # fmt: skip
    terms = fit.measure(truth, measured[0], np.random.default_rng(8))
    x, _ = fit.solve(terms, max_iter=50_000, tol=1e-8)
    # the same measurements in the normal equations of the dense solver, over the allowed cells
    n = int(keep.sum())
    hess = np.zeros((n, n))
    b = np.zeros(n)
    const = 0.0
    for term in terms:
        m = SCH.query_matrix(term.query).astype(np.float64)[:, keep]
        rows = np.unique(SCH.cells_query_index(term.query, cell[keep]))
        y = np.zeros(m.shape[0])
        y[rows] = term.y
        hess += term.weight * m.T @ m
        b += term.weight * y @ m
        const += term.weight * float(y @ y)
    dense = solve_wls_normal(hess, b[None, :].copy(), np.zeros((1, n), np.int64), [total], tol=1e-5)
    np.testing.assert_allclose(x, dense.x[0], atol=0.5)

    def objective(v: np.ndarray) -> float:  # ½ Σ_q ‖Q_q v − y_q‖² / σ_q²
        return float(0.5 * v @ hess @ v - b @ v + 0.5 * const)

    assert objective(x) <= objective(dense.x[0]) * (1 + 1e-9) + 1e-9
    # KKT of min f over {x >= 0, sum x = total}: one multiplier λ, ∇f = λ where x > 0, >= λ at 0
    g = hess @ x - b
    pos = x > 1e-6
    lam = float(np.median(g[pos]))
    assert np.abs(g[pos] - lam).max() < 1e-5
    assert (g[~pos] - lam).min() > -1e-5


def test_same_generators_same_release_and_bad_input(state, release) -> None:  # type: ignore[no-untyped-def]
    st, hierarchy, pop, measured = state
    again = sparse_topdown(
        hierarchy.parents, hierarchy.levels, pop.pl94, pop.pl94_invariants, measured,
        noise_rngs(1, st, len(hierarchy.levels)),
    )  # fmt: skip
    np.testing.assert_array_equal(again.dp[-1].cells, release.dp[-1].cells)
    np.testing.assert_array_equal(again.dp[-1].counts, release.dp[-1].counts)
    with pytest.raises(InvalidParameterError, match="parent arrays"):
        sparse_topdown(
            hierarchy.parents[:-1], hierarchy.levels, pop.pl94, pop.pl94_invariants, measured,
            noise_rngs(1, st, 5),
        )  # fmt: skip
    with pytest.raises(InvalidParameterError, match="same schema"):
        sparse_topdown(
            hierarchy.parents, hierarchy.levels, pop.pl94, pop.dhc_invariants, measured,
            noise_rngs(1, st, 5),
        )  # fmt: skip


def test_levels_in_chunks_measure_each_chunk_against_its_own_units(
    state, release, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    # Below the State a level is released chunk by chunk (whole parents, ~CHUNK_VARIABLES candidate
    # variables each: a large state's Block level). Chunks of 200 cut every level below the State
    # whose units have more than one parent; the noise is drawn in another order, so the release differs, but its error must not: each
    # chunk's measurements must be of its own units. Were a chunk measured against the first
    # units' truth, its blocks would be off by their populations (tens), not by the noise (a few).
    st, hierarchy, pop, measured = state
    monkeypatch.setattr(sparse_topdown_module, "CHUNK_VARIABLES", 200)
    chunked = sparse_topdown(
        hierarchy.parents, hierarchy.levels, pop.pl94, pop.pl94_invariants, measured,
        noise_rngs(1, st, len(hierarchy.levels)),
    )  # fmt: skip
    for i in range(1, len(hierarchy.levels)):
        chunks = sparse_topdown_module._chunks(release.dp[i - 1], hierarchy.parents[i - 1], 200)
        n_parents = np.unique(hierarchy.parents[i - 1]).size
        assert len(chunks) > 1 or n_parents == 1, hierarchy.levels[i]  # whole parents only
        whole = np.abs(np.subtract(*release.answers(i, "detailed"))).mean()
        parts = np.abs(np.subtract(*chunked.answers(i, "detailed"))).mean()
        assert parts < 1.3 * whole + 0.01, (hierarchy.levels[i], parts, whole)
    d, t = chunked.answers(len(hierarchy.levels) - 1, "total")
    assert (d != t).any() and np.abs(d - t).mean() < 10
    # released in chunks indeed: another order of draws, another release below the County
    assert any(
        a.nnz != b.nnz or (a.cells != b.cells).any() or (a.counts != b.counts).any()
        for a, b in zip(chunked.dp[2:], release.dp[2:], strict=True)
    )


@pytest.mark.parametrize("size", [1e-10, 1e-9])
def test_fits_that_differ_in_their_last_digits_release_the_same_integers(
    state, release, size: float, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Two machines (another BLAS, another order of sums) fit the same release up to ~1e-10: every
    value the rounders get is moved here by up to ``size``, and the release stays the same in
    every cell (before near-ties were ties, flips at the block group and block levels)."""
    from auditlib.simulate import sparse_rounding

    rng = np.random.default_rng(5)

    def moved(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return np.where(x > 0, x + rng.uniform(-size, size, x.shape), x)

    rc, rp = sparse_rounding.round_controlled_entries, sparse_rounding.round_preserving
    monkeypatch.setattr(
        sparse_rounding, "round_controlled_entries", lambda r, k, x, p, u: rc(r, k, moved(x), p, u)
    )
    monkeypatch.setattr(sparse_rounding, "round_preserving", lambda x, s, t: rp(moved(x), s, t))
    st, hierarchy, pop, measured = state
    again = sparse_topdown(
        hierarchy.parents, hierarchy.levels, pop.pl94, pop.pl94_invariants, measured,
        noise_rngs(1, st, len(hierarchy.levels)),
    )  # fmt: skip
    for level, (a, b) in zip(hierarchy.levels, zip(release.dp, again.dp, strict=True), strict=True):
        assert np.array_equal(a.cells, b.cells) and np.array_equal(a.counts, b.counts), level
