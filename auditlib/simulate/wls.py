"""Weighted least squares of unit histograms to noisy marginal measurements, on a feasible set.

- :class:`Measurements` — noisy marginals of many units' histograms, stacked, with their weights
  ``1/σ²``; :func:`query_matrix` one query's 0/1 matrix, checked.
- :func:`solve_wls` (:func:`solve_wls_normal` from the normal equations, :func:`solve_wls_children`
  for children grouped by parent) — ``min Σ_units Σ_q (1/σ_q²) ‖Q_q x − y_q‖²`` over ``{x ≥ 0,
  Σ_segment x = target}`` (the projections of :mod:`auditlib.simulate.postprocess`). When
  ``Σ_q Q_qᵀQ_q/σ_q²`` is a multiple of the identity (only the detailed cells measured, or a
  one-cell histogram) this is exactly a projection; otherwise projected gradient with Nesterov
  momentum and adaptive restart (FISTA), every iterate exactly feasible, stopped when the
  projected-gradient step is below ``tol`` people in every cell. Children of more than
  :data:`RUN_UNITS` units are fitted run of parents by run (the problem is separable by parent),
  each run stopped by that rule on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.simulate.postprocess import ChildSegments, FloatArray, IntArray, Segments


@dataclass(frozen=True)
class Measurements:
    """Noisy marginals of many units' histograms, stacked: ``y ≈ x @ M.T`` row by row, each column
    with weight ``1/σ²`` of its query."""

    matrix: FloatArray  # (m, n_cells): the measured queries' 0/1 rows, stacked
    weight: FloatArray  # (m,): 1/σ² of each row's query
    y: FloatArray  # (n_units, m): noisy measurements

    @classmethod
    def stack(
        cls,
        query_matrices: Mapping[str, npt.ArrayLike],
        measured: Sequence[tuple[str, float]],
        noisy: Sequence[npt.ArrayLike],
    ) -> Measurements:
        """From the measured (query, σ²) pairs and each query's noisy (n_units, n_query_cells)."""
        mats, wts = [], []
        for name, sigma2 in measured:
            mats.append(query_matrix(query_matrices, name))
            if not (np.isfinite(sigma2) and sigma2 > 0):
                raise InvalidParameterError(f"Invalid sigma2 {sigma2} for query {name!r}; need > 0")
            wts.append(np.full(mats[-1].shape[0], 1.0 / sigma2))
        if not mats:
            raise InvalidParameterError("Invalid measurements: no query measured")
        ys = [np.asarray(v, dtype=np.float64) for v in noisy]
        if len(ys) != len(mats) or any(
            v.ndim != 2 or v.shape != (ys[0].shape[0], m.shape[0])
            for v, m in zip(ys, mats, strict=True)
        ):
            raise InvalidParameterError(
                "Invalid noisy measurements: need (n_units, cells) per query"
            )
        return cls(np.vstack(mats), np.concatenate(wts), np.hstack(ys))

    @property
    def hessian(self) -> FloatArray:
        """``Σ_q Q_qᵀ Q_q / σ_q²`` (n_cells, n_cells): the objective's curvature for one unit."""
        return np.asarray((self.matrix.T * self.weight) @ self.matrix)


def query_matrix(query_matrices: Mapping[str, npt.ArrayLike], name: str) -> FloatArray:
    if name not in query_matrices:
        raise UnknownNameError(
            f"Unknown query: {name!r}; the attribute schema has {', '.join(query_matrices)}"
        )
    m = np.asarray(query_matrices[name], dtype=np.float64)
    if m.ndim != 2 or not np.isin(m, (0.0, 1.0)).all():
        raise InvalidParameterError(
            f"Invalid query matrix for {name!r}: need a 0/1 array (query cells, detailed cells)"
        )
    return m


def _segments(seg: IntArray, target: npt.ArrayLike) -> Segments | ChildSegments:
    """:class:`ChildSegments` when ``seg`` (n_units, n_cells) is ``parent · n_cells + cell`` with
    units grouped by parent (every level below the top of a TopDown run); else :class:`Segments`."""
    n_cells = seg.shape[1]
    tgt = np.asarray(target, dtype=np.float64).ravel()
    first = seg[:, 0]
    if (
        seg.size
        and tgt.size % n_cells == 0
        and not (first % n_cells).any()
        and (np.diff(first) >= 0).all()
        and (seg == first[:, None] + np.arange(n_cells)).all()
    ):
        return ChildSegments(first // n_cells, tgt.reshape(-1, n_cells))
    return Segments(seg, tgt)


@dataclass(frozen=True)
class WLSResult:
    x: FloatArray  # (n_units, n_cells), feasible
    iterations: int  # 0: solved exactly by one projection
    step: float  # last projected-gradient step, in people (max over cells): the stopping measure
    exact: bool


def solve_wls(
    meas: Measurements,
    segment: npt.ArrayLike,
    target: npt.ArrayLike,
    *,
    tol: float = 1e-3,
    max_iter: int = 20_000,
) -> WLSResult:
    """Non-negative weighted least squares of every unit's histogram to its measurements, subject to
    fixed sums of the segments (``segment`` has shape (n_units, n_cells)).

    Exact (one projection) when the curvature is a multiple of the identity; otherwise FISTA with
    adaptive restart from the projected unconstrained solution, stopped when the projected-gradient
    step ``‖x − P(x − ∇f/L)‖_∞ ≤ tol`` (people). Raises if ``max_iter`` is reached first.
    """
    b = (meas.y * meas.weight) @ meas.matrix  # Mᵀ W y per unit
    return solve_wls_normal(meas.hessian, b, segment, target, tol=tol, max_iter=max_iter)


def solve_wls_normal(
    hessian: npt.ArrayLike,
    b: npt.ArrayLike,
    segment: npt.ArrayLike,
    target: npt.ArrayLike,
    *,
    tol: float = 1e-3,
    max_iter: int = 20_000,
) -> WLSResult:
    """:func:`solve_wls` from the normal equations: ``hessian = Σ_q Q_qᵀQ_q/σ_q²`` (n_cells,
    n_cells) and ``b = Σ_q y_q Q_q/σ_q²`` (n_units, n_cells), the objective being
    ``½ xᵀ H x − bᵀx`` per unit. Measurements need not be kept: ``b`` accumulates query by query.

    ``b`` may be overwritten (pass a copy to keep it)."""
    h, bb = _normal_equations(hessian, b)
    n_units, n_cells = bb.shape
    seg = np.asarray(segment, dtype=np.int64)
    if seg.shape != (n_units, n_cells):
        raise InvalidParameterError(
            f"Invalid segment shape {seg.shape}; expected ({n_units}, {n_cells})"
        )
    if not tol > 0:
        raise InvalidParameterError(f"Invalid tol: {tol}; must be > 0")
    return _solve(h, bb, _segments(seg, target), tol, max_iter)


def solve_wls_children(
    hessian: npt.ArrayLike,
    b: npt.ArrayLike,
    parent: npt.ArrayLike,
    parent_hist: npt.ArrayLike,
    *,
    tol: float = 1e-3,
    max_iter: int = 20_000,
) -> WLSResult:
    """:func:`solve_wls_normal` of children (rows of ``b``, grouped by ``parent``) whose cells sum
    to their parent's in ``parent_hist`` (n_parents, n_cells): the segments ``parent · n_cells +
    cell``, without building them (the same result, bit for bit).

    ``b`` may be overwritten (pass a copy to keep it)."""
    h, bb = _normal_equations(hessian, b)
    par = np.asarray(parent, dtype=np.int64).ravel()
    if par.size != bb.shape[0]:
        raise InvalidParameterError(
            f"Invalid parent: {par.size} parents for {bb.shape[0]} rows of b; need one per row"
        )
    if not tol > 0:
        raise InvalidParameterError(f"Invalid tol: {tol}; must be > 0")
    return _solve(h, bb, ChildSegments(par, parent_hist), tol, max_iter)


def _normal_equations(hessian: npt.ArrayLike, b: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """``hessian`` (c, c) and ``b`` (n, c) as float arrays, or an error naming their shapes."""
    h = np.asarray(hessian, dtype=np.float64)
    bb = np.asarray(b, dtype=np.float64)
    if h.ndim != 2 or h.shape[0] != h.shape[1] or bb.ndim != 2 or bb.shape[1] != h.shape[0]:
        raise InvalidParameterError(
            f"Invalid normal equations: hessian {h.shape} and b {bb.shape}; need (c, c) and (n, c)"
        )
    return h, bb


#: units a children solve iterates on at a time (:func:`_solve`): a run's arrays stay in cache
RUN_UNITS = 8192


def _solve(
    h: FloatArray, bb: FloatArray, segs: Segments | ChildSegments, tol: float, max_iter: int
) -> WLSResult:
    """The WLS fit; children (:class:`ChildSegments`) of more than :data:`RUN_UNITS` units are fitted
    run of parents by run (:meth:`ChildSegments.runs`): the problem is separable by parent, so
    each run is its own fit, iterated until its own projected-gradient step is ``≤ tol`` — the
    stopping rule of the whole, met run by run (a run that is done stops). ``iterations`` is the
    largest run's count, ``step`` the largest run's last step."""
    n_units, n_cells = bb.shape
    c = h[0, 0]
    if c > 0 and np.allclose(h, c * np.eye(n_cells), rtol=1e-12, atol=0):
        x = segs.project(bb / c).reshape(n_units, n_cells)
        return WLSResult(x, 0, 0.0, True)
    lip = float(np.linalg.eigvalsh(h)[-1])
    pinv: FloatArray = np.asarray(np.linalg.pinv(h, hermitian=True), dtype=np.float64)
    if not isinstance(segs, ChildSegments) or n_units <= RUN_UNITS:
        return _fista(h, bb, segs, tol, max_iter, lip, pinv)
    x = np.empty_like(bb)
    iters, step = 0, 0.0
    for r0, r1, run in segs.runs(RUN_UNITS):
        sol = _fista(h, bb[r0:r1], run, tol, max_iter, lip, pinv)
        x[r0:r1] = sol.x
        iters, step = max(iters, sol.iterations), max(step, sol.step)
    return WLSResult(x, iters, step, False)


def _fista(
    h: FloatArray,
    bb: FloatArray,
    segs: Segments | ChildSegments,
    tol: float,
    max_iter: int,
    lip: float,
    pinv: FloatArray,
) -> WLSResult:
    """FISTA with adaptive restart from the projected unconstrained solution (see :func:`solve_wls`)."""
    n_units, n_cells = bb.shape
    w = bb @ pinv
    x = segs.project(w).reshape(n_units, n_cells)
    bb = np.divide(bb, lip, out=bb) if bb.flags.writeable else bb / lip
    g_mat = np.eye(n_cells) - h / lip  # z − ∇f(z)/L = z (I − H/L) + b/L
    z, t, step = x.copy(), 1.0, np.inf
    spare: FloatArray | None = None
    for it in range(1, max_iter + 1):
        np.matmul(z, g_mat, out=w)
        w += bb
        if isinstance(segs, ChildSegments):  # w: finite (from feasible z and finite b), C order
            x_new = segs._project(w, spare)
        else:
            x_new = segs.project(w).reshape(n_units, n_cells)
        moved = np.subtract(x_new, z, out=w)
        step = float(max(moved.max(initial=0.0), -moved.min(initial=0.0)))
        # z ← x_new + (t − 1)/t_new · (x_new − x), in z's buffer
        dx = np.subtract(x_new, x, out=z)
        if np.einsum("ij,ij->", moved, dx) < 0:  # momentum points uphill: restart
            t = 1.0
        t_new = (1 + np.sqrt(1 + 4 * t * t)) / 2
        dx *= (t - 1) / t_new
        dx += x_new
        z, x, t, spare = dx, x_new, t_new, x
        if step <= tol:
            return WLSResult(x, it, step, False)
    raise InvalidParameterError(
        f"WLS did not converge: step {step:.3g} > tol {tol} after max_iter = {max_iter}; "
        "raise max_iter or tol"
    )
