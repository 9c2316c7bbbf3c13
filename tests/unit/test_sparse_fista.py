"""The sparse TopDown's fit on a working set (:mod:`auditlib.simulate.sparse_fista`): most of a
Block-like fit's variables are zero at the optimum; solved over the others, with the whole
problem's projected gradient step as the check, it reaches the fit over every variable (its KKT
conditions, recovered from the gradient), and the check is what adds the variables a first set
missed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError
from auditlib.simulate import sparse_fista, sparse_fit
from auditlib.simulate.postprocess import Segments
from auditlib.simulate.sparse_fit import Term, _Fit
from auditlib.simulate.sparse_terms import TermsGradient
from tests.unit._dhc_fits import _county_instance, _kkt_segments

TIGHT = {"max_iter": 100_000, "tol": 1e-8, "feas_tol": 1e-8, "max_outer": 200}


@pytest.fixture(scope="module")
def block_like() -> tuple[_Fit, list[Term]]:
    # the Block level's queries over 30 children of one parent, 20 people each: a parent's cell
    # of a few people spread over the children that may hold it (as at the DHC's Block level,
    # where 87–96 % of a part's variables end at zero); one person per group-quarters type a
    # child holds as lower bounds
    return _county_instance(30, 5, people=20, level=4)


@pytest.fixture(scope="module")
def block_exact(block_like) -> np.ndarray:
    fit, terms = block_like
    return fit.solve(terms, **TIGHT)[0]


def _all_variables(monkeypatch) -> None:
    monkeypatch.setattr(sparse_fit, "SCREEN_MIN", 10**12)


def test_the_fit_on_a_working_set_is_the_fit_on_every_variable(block_like, monkeypatch) -> None:
    fit, terms = block_like
    assert fit.lower is not None and (fit.lower > 0).sum() > 10  # bounds in the problem
    x, _ = fit.solve(terms, **TIGHT)
    assert fit.route == "fista" and fit.sets >= 1
    assert fit.working < 0.1 * fit.unit.size  # it was solved on a working set
    assert (x > 0).mean() < 0.1
    assert _kkt_segments(fit, terms, x) < 1e-6
    _all_variables(monkeypatch)
    x_all, _ = fit.solve(terms, **TIGHT)
    assert fit.sets == 0 and fit.working == 0
    assert _kkt_segments(fit, terms, x_all) < 1e-6
    np.testing.assert_allclose(x, x_all, atol=1e-5)


def test_at_the_default_tolerance_it_is_no_further_from_the_exact_fit(
    block_like, block_exact, monkeypatch
) -> None:
    fit, terms = block_like
    exact = block_exact
    kw = {"max_iter": 100_000, "tol": 1e-4}  # sparse_topdown's default tolerance
    x, _ = fit.solve(terms, **kw)
    _all_variables(monkeypatch)
    x_all, _ = fit.solve(terms, **kw)
    err, err_all = (float(np.abs(v - exact).max()) for v in (x, x_all))
    # both within the augmented Lagrangian's feasibility tolerance (1e-3) of the exact fit
    assert err < 5e-3 and err_all < 5e-3, (err, err_all)


def test_the_whole_problems_step_adds_the_variables_a_first_set_missed(
    block_like, monkeypatch
) -> None:
    fit0, terms = block_like
    assert fit0.lower is not None
    fit = replace(fit0, lower=np.zeros_like(fit0.lower))  # no bounds: the module's function alone
    live = [t for t in terms if not fit.constant_rows(t)]
    grad = TermsGradient(live, fit.unit.size)
    lip = sum(float(np.bincount(t.inv).max()) * t.weight for t in live)
    proj = Segments(fit.segment, fit.target)
    tol = 1e-6
    placed: list[np.ndarray] = []

    def solve_on(idx: np.ndarray, start: np.ndarray, left: int) -> tuple[np.ndarray, int]:
        sub, sub_terms, _ = fit._subset(live, idx)
        xs, k = sub._solve(
            sub_terms, max_iter=left, tol=tol, feas_tol=1e-3, max_outer=40, x0=start,
            screen=False,
        )  # fmt: skip
        whole = np.zeros(fit.unit.size)
        whole[idx] = xs
        placed.append(whole)
        return xs, k

    curvature = sum(t.weight for t in live)
    start, _, _ = sparse_fista.fista(
        grad, proj, lip, proj.project(np.zeros(fit.unit.size)), tol=tol,
        max_iter=sparse_fit.SCREEN_FIRST,
    )  # fmt: skip
    x, _, done = sparse_fista.working_set_solve(
        grad, proj, curvature, np.zeros(0, np.int64), solve_on, start, converged=False, tol=tol,
        max_iter=100_000,
    )  # fmt: skip
    assert done and len(placed) >= 2  # the first set missed some of the optimum's support

    def step(v: np.ndarray) -> float:  # the whole problem's projected gradient step
        return float(np.abs(proj.project(v - grad(v) / lip) - v).max())

    first = sparse_fista.left_out(placed[0], grad(placed[0]), proj, curvature)
    assert first.max() > 100 * tol  # the first set's fit is not the whole problem's
    assert sparse_fista.left_out(x, grad(x), proj, curvature).max() <= tol
    assert step(x) < tol
    _all_variables(monkeypatch)
    exact, _ = fit.solve(terms, **TIGHT)
    assert float(np.abs(placed[0] - exact).max()) > 1e-3
    np.testing.assert_allclose(x, exact, atol=1e-4)


def test_a_set_beyond_its_share_of_the_variables_is_solved_on_every_variable(
    block_like, block_exact, monkeypatch
) -> None:
    fit, terms = block_like
    exact = block_exact
    monkeypatch.setattr(sparse_fista, "SCREEN_SHARE", 0.01)  # every set is too large
    x, _ = fit.solve(terms, **TIGHT)
    assert fit.route == "fista" and fit.sets == 0 and fit.working == 0
    assert _kkt_segments(fit, terms, x) < 1e-6
    np.testing.assert_allclose(x, exact, atol=1e-5)


def test_a_fit_on_the_dual_route_is_solved_on_a_working_set_too(monkeypatch) -> None:
    # 40 children of 25 people: the coarse rows' Lipschitz constant is ~175 times the others'
    # (the dual route), 0.04 people a variable: a few dual steps, then the sets
    fit, terms = _county_instance(40, 5, people=25, level=4)
    assert float(fit.target.sum()) < sparse_fit.SCREEN_PEOPLE * fit.unit.size
    x, _ = fit.solve(terms, **TIGHT)
    assert fit.ratio > sparse_fit.COARSE_RATIO and fit.sets >= 1
    assert fit.working < 0.1 * fit.unit.size
    assert _kkt_segments(fit, terms, x) < 1e-6
    _all_variables(monkeypatch)
    x_all, _ = fit.solve(terms, **TIGHT)
    assert fit.route == "dual" and fit.sets == 0
    np.testing.assert_allclose(x, x_all, atol=1e-5)


def test_a_fit_of_many_people_a_variable_is_solved_on_every_variable(monkeypatch) -> None:
    # 400 people a child over 8 children: 0.44 people a variable, a third of them positive
    fit, terms = _county_instance(8, 11, people=400, level=4)
    assert float(fit.target.sum()) > sparse_fit.SCREEN_PEOPLE * fit.unit.size
    monkeypatch.setattr(sparse_fit, "COARSE_RATIO", np.inf)  # FISTA's route
    x, _ = fit.solve(terms, **TIGHT)
    assert fit.route == "fista" and fit.sets == 0
    assert _kkt_segments(fit, terms, x) < 1e-6


def test_too_few_iterations_are_an_error(block_like) -> None:
    fit, terms = block_like
    with pytest.raises(InvalidParameterError, match=r"did not converge.*max_iter = 40"):
        fit.solve(terms, max_iter=40, tol=1e-8)
