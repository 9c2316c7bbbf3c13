"""The children-in-cells projection (:class:`ChildSegments`) and the WLS solver on it, against
independent references: per-segment root finding of the threshold (scipy ``brentq``), the KKT
conditions of the constrained least squares, and scipy SLSQP on small instances of the total-only and
the ``pl94`` schemas."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq, minimize

from auditlib.exceptions import InvalidParameterError
from auditlib.geography.schema import schema
from auditlib.simulate.postprocess import ChildSegments, Segments, project_simplex
from auditlib.simulate.wls import Measurements, solve_wls


def _instance(seed: int, n_cells: int = 5):
    """Parents with 0..9 children (a childless parent has target 0), zero and non-zero targets."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 10, 12)
    sizes[0] = max(sizes[0], 1)
    parent = np.repeat(np.arange(sizes.size), sizes)
    target = rng.integers(0, 30, (sizes.size, n_cells)).astype(float)
    target[rng.random(target.shape) < 0.2] = 0.0
    target[sizes == 0] = 0.0
    y = rng.normal(1.0, 6.0, (parent.size, n_cells))
    return parent, target, y


def _by_root_finding(parent, target, y):
    """Each segment's threshold τ by bracketing root finding of Σ max(y − τ, 0) = target."""
    x = np.zeros_like(y)
    for p in range(target.shape[0]):
        rows = parent == p
        for k in range(target.shape[1]):
            v, t = y[rows, k], target[p, k]
            if not rows.any() or t == 0:
                continue
            tau = brentq(
                lambda s, v=v, t=t: np.maximum(v - s, 0).sum() - t,
                v.min() - t - 1,
                v.max(),
                xtol=1e-14,
            )
            x[rows, k] = np.maximum(v - tau, 0)
    return x


@pytest.mark.parametrize("seed", range(6))
def test_child_projection_matches_root_finding_and_sorting(seed):
    parent, target, y = _instance(seed)
    cs = ChildSegments(parent, target)
    x = cs.project(y)
    np.testing.assert_allclose(x, _by_root_finding(parent, target, y), atol=1e-9)
    seg = parent[:, None] * target.shape[1] + np.arange(target.shape[1])
    np.testing.assert_allclose(x.ravel(), project_simplex(y.ravel(), seg, target), atol=1e-9)
    assert (x >= 0).all()
    sums = np.zeros_like(target)
    np.add.at(sums, parent, x)
    np.testing.assert_allclose(sums, target, atol=1e-8)


def test_child_projection_warm_starts_from_either_side():
    """The thresholds of one projection start the next: from the left, from the right, and from
    beyond every value (slope 0), the result is the cold projection's."""
    parent, target, y = _instance(7)
    seg = parent[:, None] * target.shape[1] + np.arange(target.shape[1])
    cs = ChildSegments(parent, target)
    cs.project(y)
    rng = np.random.default_rng(8)
    for shifted in (y + 1000.0, y - 1000.0, y + rng.normal(0, 0.5, y.shape), y * 3.0):
        ref = Segments(seg, target).project(shifted).reshape(y.shape)
        np.testing.assert_allclose(cs.project(shifted), ref, atol=1e-9)


def test_child_projection_rejects_bad_layouts():
    with pytest.raises(InvalidParameterError, match="grouped by parent"):
        ChildSegments([0, 1, 0], np.ones((2, 3)))
    with pytest.raises(InvalidParameterError, match="no children"):
        ChildSegments([0, 0], np.ones((2, 3)))  # parent 1 has people and no child
    with pytest.raises(InvalidParameterError, match="shape"):
        ChildSegments([0, 0], np.ones(3)).project(np.zeros((2, 3)))
    with pytest.raises(InvalidParameterError, match="expected"):
        ChildSegments([0, 0], np.ones((1, 3))).project(np.zeros((3, 3)))


def _measure(queries, measured, truth, rng):
    """Each (query, σ²) of ``measured`` answered on every row of ``truth`` with Gaussian noise of
    variance σ² from ``rng``, in order, stacked."""
    noisy = [
        truth @ queries[q].T + rng.normal(0, np.sqrt(s2), (truth.shape[0], queries[q].shape[0]))
        for q, s2 in measured
    ]
    return Measurements.stack(queries, measured, noisy)


def _kkt_gap(x, meas, parent, n_parents):
    """Largest violation of the KKT conditions of min ½ Σ w (xMᵀ − y)² over the children-in-cells
    set: per (parent, cell) one multiplier λ with ∇ = λ where x > 0 and ∇ ≥ λ where x = 0."""
    grad = ((x @ meas.matrix.T - meas.y) * meas.weight) @ meas.matrix
    worst = 0.0
    for p in range(n_parents):
        rows = parent == p
        for k in range(x.shape[1]):
            g, pos = grad[rows, k], x[rows, k] > 1e-9
            if not pos.any():
                continue
            lam = g[pos].mean()
            worst = max(worst, np.abs(g[pos] - lam).max(), max(0.0, (lam - g[~pos]).max(initial=0)))
    return worst


def _slsqp_wls(meas, parent, target):
    n_units, n_cells = meas.y.shape[0], meas.matrix.shape[1]
    a = np.zeros((target.size, n_units * n_cells))
    seg = (parent[:, None] * n_cells + np.arange(n_cells)).ravel()
    a[seg, np.arange(seg.size)] = 1.0

    def f(v):
        r = v.reshape(n_units, n_cells) @ meas.matrix.T - meas.y
        return 0.5 * np.sum(r**2 * meas.weight)

    def grad(v):
        r = v.reshape(n_units, n_cells) @ meas.matrix.T - meas.y
        return ((r * meas.weight) @ meas.matrix).ravel()

    x0 = (target / np.bincount(parent)[:, None])[parent].ravel()
    r = minimize(
        f,
        x0,
        jac=grad,
        method="SLSQP",
        bounds=[(0, None)] * seg.size,
        constraints=[{"type": "eq", "fun": lambda v: a @ v - target.ravel()}],
        options={"ftol": 1e-13, "maxiter": 3000},
    )
    assert r.success, r.message
    return r.x.reshape(n_units, n_cells), f


@pytest.mark.parametrize(("name", "seed"), [("total", 0), ("total", 1), ("pl94", 2), ("pl94", 3)])
def test_wls_on_children_matches_slsqp_and_kkt(name, seed):
    """Total-only (one exact projection) and the 28-cell ``pl94`` schema with all its queries
    (FISTA): the objective is SLSQP's or lower, and the KKT conditions hold."""
    sch = schema(name)
    queries = {q: sch.query_matrix(q) for q in sch.query_names}
    rng = np.random.default_rng(seed)
    parent = np.repeat([0, 1], [2, 1])
    truth = rng.poisson(1.5, (parent.size, sch.n_cells))
    target = np.zeros((2, sch.n_cells))
    np.add.at(target, parent, truth)
    measured = [(q, float(rng.uniform(1.0, 9.0))) for q in queries]
    meas = _measure(queries, measured, truth, rng)
    seg = parent[:, None] * sch.n_cells + np.arange(sch.n_cells)
    sol = solve_wls(meas, seg, target, tol=1e-9)
    assert sol.exact == (name == "total")
    assert (sol.x >= 0).all()
    sums = np.zeros_like(target)
    np.add.at(sums, parent, sol.x)
    np.testing.assert_allclose(sums, target, atol=1e-8)
    assert _kkt_gap(sol.x, meas, parent, 2) < 1e-6
    ref, f = _slsqp_wls(meas, parent, target)
    assert f(sol.x.ravel()) <= f(ref.ravel()) + 1e-7
    np.testing.assert_allclose(sol.x, ref, atol=1e-4)


def test_wls_same_solution_whatever_the_unit_order():
    """Units not grouped by parent take the sort-based projection; the solution is the same."""
    sch = schema("pl94")
    queries = {q: sch.query_matrix(q) for q in ("total", "race", "votingage", "detailed")}
    rng = np.random.default_rng(5)
    parent = np.repeat([0, 1, 2], [4, 6, 2])
    truth = rng.poisson(2.0, (parent.size, 28))
    target = np.zeros((3, 28))
    np.add.at(target, parent, truth)
    measured = [("total", 2.0), ("race", 3.0), ("votingage", 5.0), ("detailed", 8.0)]
    meas = _measure(queries, measured, truth, rng)
    seg = parent[:, None] * 28 + np.arange(28)
    grouped = solve_wls(meas, seg, target, tol=1e-9)
    perm = rng.permutation(parent.size)
    shuffled = Measurements(meas.matrix, meas.weight, meas.y[perm])
    other = solve_wls(shuffled, seg[perm], target, tol=1e-9)
    np.testing.assert_allclose(other.x, grouped.x[perm], atol=1e-6)


def test_release_does_not_depend_on_the_chunk_size(monkeypatch):
    """Measuring and rounding in chunks of rows gives the release of one chunk, bit for bit."""
    from auditlib import seeds
    from auditlib.simulate import topdown as td

    h = td.StateHierarchy.from_fanouts(("State", "County", "Block"), (3, 40))
    sch = schema("pl94")
    queries = {q: sch.query_matrix(q) for q in ("total", "race", "votingage", "detailed")}
    measured = [[("total", 1.0), ("detailed", 4.0)]] + [
        [("total", 2.0), ("race", 3.0), ("votingage", 4.0), ("detailed", 9.0)]
    ] * 2
    blocks = np.random.default_rng(4).poisson(0.7, size=(120, 28))

    def run():
        rngs = [seeds.rng(9, td.TOPDOWN_NOISE, 1, i, 0) for i in range(3)]
        return td.topdown(h, blocks, queries, measured, rngs)

    whole = run()
    monkeypatch.setattr(td, "CHUNK_ROWS", 7)  # chunks that split neither parents evenly nor rows
    chunked = run()
    for a, c in zip(whole.dp, chunked.dp, strict=True):
        np.testing.assert_array_equal(a, c)
    assert chunked.dp[-1].min() >= 0
    np.testing.assert_array_equal(
        np.add.reduceat(chunked.dp[-1], np.arange(0, 120, 40), axis=0), chunked.dp[1]
    )


def test_child_projection_falls_back_to_sorting_when_newton_stalls():
    """With the Newton budget cut to one step the search cannot finish; the sort-based projection
    gives the answer (and the next call starts cold)."""
    parent, target, y = _instance(9)
    seg = parent[:, None] * target.shape[1] + np.arange(target.shape[1])
    cs = ChildSegments(parent, target)
    cs.width = -2  # range(width + 3): one Newton step
    np.testing.assert_allclose(
        cs.project(y), Segments(seg, target).project(y).reshape(y.shape), atol=1e-12
    )
    assert cs.tau is None


def test_child_runs_partition_the_units_into_whole_parents():
    """Runs of whole parents, in order, covering every unit once; a parent larger than the run
    size is a run of its own; each run projects as the whole does on its rows."""
    parent, target, y = _instance(11)
    sizes = np.bincount(parent, minlength=target.shape[0])
    cs = ChildSegments(parent, target)
    runs = cs.runs(10)
    assert len(runs) > 3
    assert runs[0][0] == 0 and runs[-1][1] == parent.size
    whole = cs.project(y)
    p0 = 0
    for (r0, r1, run), nxt in zip(runs, [*runs[1:], (parent.size,)], strict=True):
        assert r1 == nxt[0]
        p1 = p0 + run.target.shape[0]
        assert r1 - r0 == sizes[p0:p1].sum()
        assert r1 - r0 <= 10 or p1 == p0 + 1  # a run passes its size only with one parent
        np.testing.assert_array_equal(run.parent, parent[r0:r1] - p0)
        np.testing.assert_array_equal(run.target, target[p0:p1])
        np.testing.assert_allclose(run.project(y[r0:r1]), whole[r0:r1], atol=1e-9)
        p0 = p1
    assert p0 == target.shape[0]


def test_wls_run_by_run_meets_the_whole_fits_guarantees(monkeypatch):
    """Children fitted run of parents by run (each run its own FISTA, restart and stopping rule):
    exactly feasible, the same stopping tolerance, and as close to the optimum (a fit at tol 1e-10)
    as the fit of the whole level at the same tolerance."""
    from auditlib.simulate import wls

    sch = schema("pl94")
    queries = {q: sch.query_matrix(q) for q in sch.query_names}
    rng = np.random.default_rng(12)
    sizes = rng.integers(1, 12, 40)
    parent = np.repeat(np.arange(40), sizes)
    truth = rng.poisson(0.8, (parent.size, 28))
    target = np.zeros((40, 28))
    np.add.at(target, parent, truth)
    measured = [(q, float(rng.uniform(1.0, 30.0))) for q in queries]
    meas = _measure(queries, measured, truth, rng)
    b = (meas.y * meas.weight) @ meas.matrix

    def fit(run_units: int, tol: float):
        monkeypatch.setattr(wls, "RUN_UNITS", run_units)
        return wls.solve_wls_children(meas.hessian, b.copy(), parent, target, tol=tol)

    best = fit(10**6, 1e-10).x
    whole = fit(10**6, 1e-3)
    split = fit(20, 1e-3)
    assert len(ChildSegments(parent, target).runs(20)) > 10
    assert split.step <= 1e-3 and split.iterations > 1 and not split.exact
    assert not np.array_equal(split.x, whole.x)  # really another iteration
    assert (split.x >= 0).all()
    sums = np.zeros_like(target)
    np.add.at(sums, parent, split.x)
    assert (np.abs(sums - target) <= 1e-9 * (1 + target)).all()
    err_whole = np.abs(whole.x - best).max()
    err_split = np.abs(split.x - best).max()
    assert err_split <= max(2 * err_whole, 1e-3), (err_split, err_whole)
    kkt_whole, kkt_split = _kkt_gap(whole.x, meas, parent, 40), _kkt_gap(split.x, meas, parent, 40)
    assert kkt_split <= max(2 * kkt_whole, 1e-3), (kkt_split, kkt_whole)
