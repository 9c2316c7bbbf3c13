"""FISTA over segments for the sparse TopDown fit (:mod:`auditlib.simulate.sparse_fit`), and the
working set its least squares are solved on.

:func:`fista` is the restarted accelerated projected gradient the fit runs (O'Donoghue & Candès'
gradient restart; it stops when no variable moves by more than ``tol`` in a step), inside an
augmented Lagrangian for the group-quarters lower bounds (:func:`augmented_lagrangian`).

A level's fitted values are mostly zero: at the DHC's Block level 87–97 % of a part's (unit, cell)
variables are 0 at the optimum (a parent's cell of two people spread over the ~30 children that
may hold it ends in one or two of them). The coarse queries' rows (a unit's cells of one query
cell, 150–230 variables on average there) set FISTA's step 1/L, so it needs 300–1,200 steps over
all the variables. From a few steps over all of them, :func:`working_set_solve` solves the
problem over a working set: the variables that are positive, or that would take more than
``tol`` people by the whole problem's gradient (:func:`left_out`; the others held at zero: the
same problem where they are zero at the optimum). It checks the whole problem's gradient at that
fit and adds the variables it would give more than ``tol`` people, until there are none. On the
working set the rows hold a few variables each, so its fit is better conditioned as well as
smaller (``benchmarks/README.md``, "Sparse TopDown").

The check is the one that counts: FISTA's own stop (no variable moves by ``tol`` in a step of
``1/L``) can leave out a variable whose gradient is below its segment's by up to ``L · tol``:
at the Block's ``L / Σ_q w_q ≈ 200–250`` one that would hold about 0.02 people (0.017 in
``tests/unit/test_sparse_fista.py``'s instance). Measured in people at the variable's own
curvature, a variable left out holds less than ``tol``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.simulate.postprocess import Segments

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: a working set larger than this share of the variables is not worth it: all of them are solved
#: (PL94's Tract part of a large county, 40 % of its variables in the set: 1,102 steps on the
#: set against 638 over all; the DHC's Block parts: 5–15 %)
SCREEN_SHARE = 0.25
#: rounds of adding the variables the whole problem's gradient would give more than ``tol`` people
SCREEN_ROUNDS = 20


def fista(
    grad: Callable[[FloatArray], FloatArray],
    proj: Segments,
    lip: float,
    x: FloatArray,
    *,
    tol: float,
    max_iter: int,
) -> tuple[FloatArray, int, float]:
    """FISTA with gradient restart from the feasible ``x``, at step ``1 / lip``, until no variable
    moves by more than ``tol`` in a step or after ``max_iter`` steps: the last iterate, the steps
    taken and the last step's largest move (``< tol``: converged)."""
    w, k = x.copy(), 1.0
    its, step = 0, np.inf
    while its < max_iter:
        its += 1
        g = grad(w)
        x_new = proj.project(w - g / lip)
        step = float(np.max(np.abs(x_new - x), initial=0.0))
        if float(g @ (x_new - x)) > 0:  # momentum points uphill: restart
            k = 1.0
        k_new = (1.0 + np.sqrt(1.0 + 4.0 * k * k)) / 2.0
        w = x_new + ((k - 1.0) / k_new) * (x_new - x)
        x, k = x_new, k_new
        if step < tol:
            break
    return x, its, step


def augmented_lagrangian(
    terms_grad: Callable[[FloatArray], FloatArray],
    proj: Segments,
    lip_f: float,
    bounds: tuple[IntArray, IntArray, FloatArray],
    x: FloatArray,
    mu: FloatArray,
    *,
    max_iter: int,
    tol: float,
    feas_tol: float,
    max_outer: int,
) -> tuple[FloatArray, int, int, FloatArray, float]:
    """:func:`fista` on the least-squares terms (``terms_grad``, step constant ``lip_f``) with the
    lower bounds ``Σ_{variables gv of group g} x ≥ low[g]`` (``bounds = (gv, gg, low)``) in an
    augmented Lagrangian: FISTA for fixed multipliers from the feasible ``x``, then a multiplier
    step from ``mu``, until the bounds hold to ``feas_tol`` or after ``max_outer`` rounds.
    Returns the values, the FISTA steps, the rounds, and the last round's multipliers and
    penalty (``0`` without bounds)."""
    gv, gg, low = bounds
    n_g = low.size
    size = float(np.bincount(gg).max()) if n_g else 1.0
    rho = lip_f / size if n_g else 0.0
    lip = lip_f + rho * size if n_g else lip_f

    def group_sums(v: FloatArray) -> FloatArray:
        return np.bincount(gg, weights=v[gv], minlength=n_g).astype(np.float64)

    def grad(v: FloatArray) -> FloatArray:
        g = terms_grad(v)
        if n_g:
            g[gv] -= np.maximum(0.0, mu + rho * (low - group_sums(v)))[gg]
        return g

    total, outer = 0, 0
    while True:
        x, its, step = fista(grad, proj, lip, x, tol=tol, max_iter=max_iter - total)
        total += its
        if step >= tol:
            raise NotConverged(step, tol, max_iter)
        outer += 1
        if not n_g:
            return x, total, outer, mu, rho
        gap = low - group_sums(x)
        if float(gap.max()) <= feas_tol or outer >= max_outer:
            return x, total, outer, mu, rho
        mu = np.maximum(0.0, mu + rho * gap)


class NotConverged(InvalidParameterError):
    """The fit did not converge within its iterations (``step``: its last step's largest move)."""

    def __init__(self, step: float, tol: float, max_iter: int) -> None:
        super().__init__(
            f"Sparse TopDown fit did not converge: step {step:.3g} > tol {tol} after "
            f"max_iter = {max_iter}; raise max_iter or tol"
        )
        self.step = step


def working_set_solve(
    grad: Callable[[FloatArray], FloatArray],
    proj: Segments,
    curvature: float,
    keep: IntArray,
    solve_on: Callable[[IntArray, FloatArray, int], tuple[FloatArray, int]],
    x: FloatArray,
    *,
    converged: bool,
    tol: float,
    max_iter: int,
) -> tuple[FloatArray, int, bool]:
    """The fit on a working set (module docstring), from ``x`` (a few steps over every variable;
    ``converged``: already the fit if no variable is left out). ``grad``: the whole problem's
    gradient (with the group bounds' multipliers of the last ``solve_on``), ``curvature`` each
    variable's own second derivative (``Σ_q w_q``: a variable is in one row of every query),
    ``keep`` variables always in the set (the bounded groups'); ``solve_on(idx, x0, max_iter)``
    solves the problem over the variables ``idx`` from ``x0`` (the others at zero) and returns
    their values and its FISTA steps. Returns the fitted values, the steps taken, and whether they
    are the fit: not when a set would hold more than :data:`SCREEN_SHARE` of the variables, or
    after :data:`SCREEN_ROUNDS` rounds (then solve all of them from there)."""
    n = proj.seg.size
    its = 0
    work = np.zeros(n, dtype=bool)
    work[keep] = True
    for r in range(SCREEN_ROUNDS):
        would = left_out(x, grad(x), proj, curvature)
        enter = would > tol
        if (r or converged) and not enter.any():
            return x, its, True
        if its >= max_iter:
            raise NotConverged(float(would.max()), tol, max_iter)
        work |= (x > 0) | enter
        idx = np.flatnonzero(work)
        if idx.size > SCREEN_SHARE * n:
            break
        sub, k = solve_on(idx, x[idx], max_iter - its)
        its += k
        x = np.zeros(n)
        x[idx] = sub
    return x, its, False


def left_out(x: FloatArray, g: FloatArray, proj: Segments, curvature: float) -> FloatArray:
    """About how many people each variable at zero would take at the optimum, given ``x`` (optimal
    over its positive variables) and the gradient ``g`` there: ``(τ_s − g_i) / curvature``, with
    ``τ_s`` the gradient on the segment's positive variables (all equal at the optimum, the
    segment's multiplier: moving ``δ`` people into variable ``i`` changes the objective by about
    ``(g_i − τ_s) δ + curvature δ² / 2``); 0 for the positive variables."""
    m = proj.target.size
    pos = x > 0
    held = np.bincount(proj.seg, weights=pos, minlength=m)
    tau = np.bincount(proj.seg, weights=np.where(pos, g, 0.0), minlength=m) / np.maximum(held, 1)
    out = (tau[proj.seg] - g) / curvature
    out[pos | (held[proj.seg] == 0)] = 0.0
    return out
