"""The DHC's State fit with coarse queries (rows of many cells at the detailed query's σ²): the
sparse TopDown's least squares (:mod:`auditlib.simulate.sparse_coarse`) is the solution of the
constrained weighted least squares — checked against an independent solver (SLSQP) on a small
instance and by its KKT conditions on a larger one with binding group-quarters bounds — and it
converges where plain projected gradient does not."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import optimize, sparse

from auditlib.exceptions import InvalidParameterError
from auditlib.simulate import sparse_coarse, sparse_fit, sparse_parts
from auditlib.simulate.sparse_fit import Term, _Fit
from auditlib.simulate.sparse_parts import ranges
from tests.unit._dhc_fits import (
    _county_instance,
    _instance,
    _kkt_segments,
    _kkt_violation,
)


def test_state_fit_matches_an_independent_solver_on_a_small_instance() -> None:
    # 300 people over the cells of 2 ages × 1 race: 296 variables; the gq301 (nursing) bound binds;
    # the queries with rows of more than 64 cells measured with σ² / 10 (as ill-conditioned as
    # the larger instance below)
    fit, terms = _instance(range(40, 42), (0,), 300, 3, {10: 12.0})
    terms = [
        replace(t, weight=t.weight * 10) if np.bincount(t.inv).max() > 64 else t for t in terms
    ]
    x, _ = fit.solve(terms, max_iter=5000, tol=1e-9)
    assert fit.route == "dual"
    # independently: bounded-variable least squares (BVLS) over (x, s) ≥ 0, the rows √w_q Q_q
    # against √w_q y_q, the total and the bound Σ_nursing x − s = 12 as heavily weighted rows
    n = x.size
    rows = [
        np.sqrt(t.weight)
        * sparse.csr_matrix((np.ones(n), (t.inv, np.arange(n))), shape=(t.y.size, n)).toarray()
        for t in terms
    ]
    rhs = [np.sqrt(t.weight) * t.y for t in terms]
    grp = fit.group
    assert grp is not None
    nursing = (grp == 10).astype(float)
    big = 1e4
    m = np.vstack(
        [np.hstack([r, np.zeros((r.shape[0], 1))]) for r in rows]
        + [big * np.append(np.ones(n), 0.0), big * np.append(nursing, -1.0)]
    )
    res = optimize.lsq_linear(m, np.concatenate([*rhs, [big * 300.0, big * 12.0]]),
                              bounds=(0, np.inf), method="bvls", tol=1e-14)  # fmt: skip
    assert res.success, res.message
    assert res.x[-1] < 1e-6 and nursing @ res.x[:n] == pytest.approx(12.0, abs=1e-5)  # binds
    np.testing.assert_allclose(x, res.x[:n], atol=1e-4)
    assert abs(float(x.sum()) - 300.0) < 1e-9 and x.min() >= 0
    assert nursing @ x >= 12.0 - 1e-6
    assert _kkt_violation(fit, terms, x) < 1e-5


@pytest.fixture(scope="module")
def larger() -> tuple[_Fit, list[Term]]:
    # 600 people over 8 ages × 2 races (≈ 2,400 variables): the coarse rows hold up to ~1,200
    # cells; bounds on gq301 (nursing) and gq501 (college) above what the noisy data give
    return _instance(range(20, 28), (0, 1), 600, 5, {10: 25.0, 16: 30.0})


def test_state_fit_meets_the_kkt_conditions_with_binding_bounds(larger) -> None:
    fit, terms = larger
    x, its = fit.solve(terms, max_iter=2000, tol=1e-8)
    assert fit.route == "dual" and its < 2000
    assert _kkt_violation(fit, terms, x) < 1e-5
    assert fit.group is not None
    sums = np.bincount(fit.group, weights=x)
    assert sums[10] == pytest.approx(25.0, abs=1e-6) and sums[16] == pytest.approx(30.0, abs=1e-6)
    assert fit.mu[10] > 0 and fit.mu[16] > 0  # the bounds' multipliers


def test_projected_gradient_does_not_converge_where_the_dual_route_does(
    larger, monkeypatch
) -> None:
    fit, terms = larger
    # the coarse rows make FISTA's step 1/L tiny: not converged within the iterations the dual
    # route needs many times over
    x, its = fit.solve(terms, max_iter=400, tol=1e-4)
    assert fit.route == "dual" and its < 100
    monkeypatch.setattr(sparse_fit, "COARSE_RATIO", np.inf)  # the single FISTA of before
    monkeypatch.setattr(sparse_fit, "SCREEN_MIN", 10**12)  # over every variable
    with pytest.raises(InvalidParameterError, match="did not converge"):
        fit.solve(terms, max_iter=400, tol=1e-4)
    assert fit.route == "fista"
    assert _kkt_violation(fit, terms, x) < 1e-3


@pytest.fixture(scope="module")
def county() -> tuple[_Fit, list[Term]]:
    return _county_instance(8, 11)


def test_county_fit_by_conjugate_gradients_is_the_dense_newton_fit(county, monkeypatch) -> None:
    # the Newton steps of the dual by preconditioned conjugate gradients (every level with more
    # than DENSE_ROWS dual rows: County, Tract_Subset of real states) reach the same point as by
    # dense solves, and that point meets the KKT conditions of the whole problem
    fit, terms = county
    monkeypatch.setattr(sparse_coarse, "DENSE_ROWS", 10**6)
    x_dense, _ = fit.solve(terms, max_iter=5000, tol=1e-9)
    assert fit.route == "dual" and fit.cg == 0
    monkeypatch.setattr(sparse_coarse, "DENSE_ROWS", 0)
    x_cg, _ = fit.solve(terms, max_iter=5000, tol=1e-9)
    assert fit.route == "dual" and fit.cg > 0
    np.testing.assert_allclose(x_cg, x_dense, atol=1e-6)
    assert _kkt_segments(fit, terms, x_cg) < 1e-5


def test_the_coarse_correction_cuts_the_conjugate_gradient_iterations(county, monkeypatch) -> None:
    # the children's rows of one query cell sum to the parent's, fixed by the segments: the
    # block preconditioner alone misses these flat directions, the balancing correction over
    # the rows' kinds removes them (3.0 times fewer iterations here at CG_RTOL 1e-2, 2.4 at
    # 1e-3; 3.2 at a real County)
    fit, terms = county
    monkeypatch.setattr(sparse_coarse, "DENSE_ROWS", 0)
    x_kinds, _ = fit.solve(terms, max_iter=5000, tol=1e-6)
    with_kinds = fit.cg
    monkeypatch.setattr(fit, "group_type", None)  # no kinds: the block preconditioner alone
    x_block, _ = fit.solve(terms, max_iter=5000, tol=1e-6)
    without = fit.cg
    np.testing.assert_allclose(x_kinds, x_block, atol=1e-4)
    assert with_kinds * 2 < without, (with_kinds, without)


def test_the_preconditioner_is_the_balancing_formula_on_dense_matrices(county, monkeypatch) -> None:
    # M = (I − Z E⁻¹ Zᵀ H) P⁻¹ (I − H Z E⁻¹ Zᵀ) + Z E⁻¹ Zᵀ (Mandel's balancing preconditioner),
    # formed here from dense matrices: H the dual's Hessian (the dense route's), P its part
    # without the segment term, Z the rows' kinds; at a Newton step of the County fit with some
    # bounds' rows fixed (the columns taken in place), and with all its rows free
    fit, terms = county
    monkeypatch.setattr(sparse_coarse, "DENSE_ROWS", 0)
    seen: list[tuple[sparse_coarse.CoarseProx, np.ndarray, np.ndarray]] = []
    direction = sparse_coarse.CoarseProx._direction

    def record(self, x, grad, on):
        seen.append((self, x.copy(), on.copy()))
        return direction(self, x, grad, on)

    monkeypatch.setattr(sparse_coarse.CoarseProx, "_direction", record)
    fit.solve(terms, max_iter=5000, tol=1e-6)
    prox, x, some = next(step for step in seen if not step[2].all())
    assert prox.kind is not None
    rng = np.random.default_rng(5)
    for on in (some, np.ones_like(some)):
        idx = np.flatnonzero(on)
        bf, _, cnt, shift, sums = prox._parts(x)
        part = idx.size < on.size
        pre = prox._preconditioner(bf, sums, cnt, shift[idx], prox.kind[idx], idx if part else None)
        h = prox._hessian(x)[np.ix_(idx, idx)]
        b = bf[:, idx].toarray()
        p = b.T @ b / prox.lip + np.diag(shift[idx])
        _, kind = np.unique(prox.kind[idx], return_inverse=True)
        z = np.eye(int(kind.max()) + 1)[kind]
        e_inv = np.linalg.pinv(z.T @ h @ z)
        q = np.eye(idx.size) - h @ z @ e_inv @ z.T
        m = q.T @ np.linalg.inv(p) @ q + z @ e_inv @ z.T
        for _ in range(3):
            v = rng.standard_normal(idx.size)
            np.testing.assert_allclose(pre(v), m @ v, rtol=1e-7, atol=1e-9 * np.abs(m @ v).max())


def _side_by_side(
    a: tuple[_Fit, list[Term]], b: tuple[_Fit, list[Term]]
) -> tuple[_Fit, list[Term]]:
    """Two parents' fits as one problem (units, segments, groups and rows of ``b`` after
    ``a``'s), with each variable's parent."""
    (fa, ta), (fb, tb) = a, b
    assert fa.group is not None and fb.group is not None and fa.lower is not None
    assert fb.lower is not None and fa.group_type is not None and fb.group_type is not None
    fit = _Fit(
        np.concatenate([fa.unit, fb.unit + int(fa.unit.max()) + 1]),
        np.concatenate([fa.cell, fb.cell]),
        np.concatenate([fa.segment, fb.segment + fa.target.size]),
        np.concatenate([fa.target, fb.target]),
        np.concatenate([fa.group, fb.group + fa.lower.size]),
        np.concatenate([fa.lower, fb.lower]),
        np.concatenate([fa.group_type, fb.group_type]),
        np.repeat(np.array([0, 1]), [fa.unit.size, fb.unit.size]),
    )
    terms = [
        Term(
            x.query,
            np.concatenate([x.inv, y.inv + x.y.size]),
            np.concatenate([x.y, y.y]),
            x.weight,
            np.concatenate([x.row_cell, y.row_cell]),
        )
        for x, y in zip(ta, tb, strict=True)
        if x.row_cell is not None and y.row_cell is not None
    ]
    return fit, terms


def test_a_fit_in_parts_of_whole_parents_is_the_joint_fit(county, monkeypatch) -> None:
    # below the State the problem separates by parent: solved part by part (each at its own
    # pace), it is the joint problem's solution
    fit, terms = _side_by_side(county, _county_instance(5, 12))
    monkeypatch.setattr(sparse_coarse, "DENSE_ROWS", 0)
    x_joint, _ = fit.solve(terms, max_iter=5000, tol=1e-9)
    assert fit.route == "dual"
    monkeypatch.setattr(sparse_parts, "PART_VARIABLES", 100)
    assert len(ranges(fit.parent, fit.unit.size)) == 2
    x_parts, _ = fit.solve(terms, max_iter=5000, tol=1e-9)
    assert fit.route == "dual"
    np.testing.assert_allclose(x_parts, x_joint, atol=1e-6)
    assert _kkt_segments(fit, terms, x_parts) < 1e-5
    fb, tb = _county_instance(5, 12)  # the second parent's part alone
    x_b, _ = fb.solve(tb, max_iter=5000, tol=1e-9)
    np.testing.assert_allclose(x_parts[fit.unit.size - fb.unit.size :], x_b, atol=1e-6)


def test_the_constraint_rows_are_the_coarse_rows_then_the_bounded_groups() -> None:
    # bt[v, r] = 1 where variable v is in coarse row r (each term's rows after the previous
    # term's), −1 in its bounded group's column after all rows; c = (y, −lower); inv_w = (1/w, 0)
    rng = np.random.default_rng(4)
    n = 40
    inv = [rng.integers(0, 3, n), rng.integers(0, 5, n)]
    inv = [np.unique(v, return_inverse=True)[1].astype(np.int64) for v in inv]
    y = [rng.normal(size=int(v.max()) + 1) for v in inv]
    gv = np.sort(rng.choice(n, 15, replace=False)).astype(np.int64)
    gg = rng.integers(0, 4, gv.size).astype(np.int64)
    gg = np.unique(gg, return_inverse=True)[1].astype(np.int64)
    low = rng.uniform(1, 3, int(gg.max()) + 1)
    bt, c, inv_w, bounded = sparse_coarse.constraint_rows(n, inv, y, [2.0, 0.5], gv, gg, low)
    m = y[0].size + y[1].size + low.size
    dense = np.zeros((n, m))
    for v in range(n):
        dense[v, inv[0][v]] = 1.0
        dense[v, y[0].size + inv[1][v]] = 1.0
    for v, g in zip(gv, gg, strict=True):
        dense[v, y[0].size + y[1].size + g] = -1.0
    np.testing.assert_array_equal(bt.toarray(), dense)
    assert bt.has_canonical_format  # sorted, no duplicates: what the solver's products expect
    np.testing.assert_array_equal(c, np.concatenate([y[0], y[1], -low]))
    np.testing.assert_array_equal(
        inv_w,
        np.concatenate([np.full(y[0].size, 0.5), np.full(y[1].size, 2.0), np.zeros(low.size)]),
    )
    np.testing.assert_array_equal(bounded, np.arange(m) >= y[0].size + y[1].size)


def test_block_like_parts_at_a_moderate_coarse_ratio_reach_the_same_fit_by_either_route(
    monkeypatch,
) -> None:
    # the Block level's queries on 8 small units: the coarse rows' Lipschitz constant is ~28
    # times the fine terms' (below COARSE_RATIO: FISTA). With the threshold at 10 the dual route
    # takes them, in many fewer (costlier) iterations (benchmarks/README.md: cheaper on real
    # spine states' Block parts, dearer on small Prim-rich ones); both reach the same fit
    fit, terms = _county_instance(8, 11, people=100, level=4)
    monkeypatch.setattr(sparse_fit, "COARSE_RATIO", 10.0)
    monkeypatch.setattr(sparse_fit, "SCREEN_MIN", 10**12)  # the routes over every variable
    x_exact, _ = fit.solve(terms, max_iter=20_000, tol=1e-9)
    assert 10 < fit.ratio < 100 and fit.route == "dual"
    x_dual, its_dual = fit.solve(terms, max_iter=20_000, tol=1e-4)
    assert fit.route == "dual"
    monkeypatch.setattr(sparse_fit, "COARSE_RATIO", 100.0)
    x_fista, its_fista = fit.solve(terms, max_iter=20_000, tol=1e-4)
    assert fit.route == "fista"
    assert its_dual * 5 < its_fista, (its_dual, its_fista)
    # each within a few thousandths of a person per cell of the exact fit, the dual closer
    err_dual, err_fista = (float(np.abs(x - x_exact).max()) for x in (x_dual, x_fista))
    assert err_dual < 5e-3 and err_fista < 5e-3, (err_dual, err_fista)
    assert float(np.abs(x_dual - x_exact).sum()) < float(np.abs(x_fista - x_exact).sum())
    assert _kkt_segments(fit, terms, x_exact) < 1e-5
