"""The coarse queries of a sparse TopDown fit, solved through their dual (:mod:`.sparse_fit`).

A query whose rows hold many variables (the DHC's ``sex * hispanic`` at the State: rows of 10⁵
cells) makes the fit's objective ``½ Σ_q ‖Q_q x − y_q‖² / σ_q²`` ill-conditioned for a first-order
method: its curvature along a row is ``row size / σ²`` against ``1/σ²`` for a detailed cell. Such
*coarse* rows are few (≈ 185 at the DHC's State), so they are kept out of the gradient step and
solved exactly in the proximal step instead:

    x⁺ = argmin ½ L ‖x − u‖² + ½ Σ_r w_r (a_rᵀx − y_r)²   over x ≥ 0, Σ_segment x = target,
                                                         Σ_group x ≥ lower,

``u`` the gradient step of the other (fine) queries, ``L`` their Lipschitz constant. Its dual over
one multiplier per coarse row (``λ_r``, free) and per bounded group (``ν_g ≥ 0``) is concave,
piecewise quadratic and low-dimensional; the primal point of a dual point is one exact Euclidean
projection onto the segments (:class:`~auditlib.simulate.postprocess.Segments`),

    x(λ, ν) = Π(u − (Aᵀλ − Gᵀν) / L),

and its (generalised) Hessian ``B J Bᵀ / L + diag(1/w_r, 0)`` is a small dense matrix, ``J`` the
projection's Jacobian (identity minus the segment mean on the positive variables, zero elsewhere).
:class:`CoarseProx` maximises the dual by projected Newton steps with a backtracking line search,
warm-started from the previous step's multipliers; at the optimum ``λ_r = w_r (a_rᵀx − y_r)``
(the row's residual gradient) and ``ν`` are the bounds' Lagrange multipliers, so the outer loop's
fixed point satisfies the KKT conditions of the whole problem with the bounds exact (no augmented
Lagrangian rounds).

The Newton system is solved densely up to :data:`DENSE_ROWS` rows (the State). Below the State
every child has its own coarse rows (a County level: 185 per county; S46's Tract_Subset 31,800),
and the system goes to conjugate gradients, inexact (:data:`CG_RTOL`: any number of iterations
gives an ascent direction; the line search does the rest), preconditioned by the Hessian without
its segment term (block-diagonal by unit) plus a coarse correction over the rows' *kinds* (one
query cell of all the children): the children's rows of a query cell sum to the parent's, which
the segments fix, so the Hessian is flat along those sums and the block preconditioner alone
misses them (:meth:`CoarseProx._preconditioner`). The fit's outer loop
(:meth:`~auditlib.simulate.sparse_fit._Fit.solve`) asks each proximal step for a dual gradient
of a tenth of its last step only, and for the exact one at the end. On S46's DHC
(benchmarks/README.md) the County fit took 100 CPU-s before these three changes, 24 after; its
Tract_Subset did not finish in 7 CPU-min before, and takes ≈ 170 CPU-s after.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import sparse
from scipy.sparse import linalg as splinalg

from auditlib.simulate.postprocess import Segments
from auditlib.simulate.sparse_sums import SegmentSums, gram, square_sums, square_sums_by_row

IntArray = npt.NDArray[np.int64]
RowArray = npt.NDArray[np.signedinteger[Any]]  # a term's rows: int32 or int64
FloatArray = npt.NDArray[np.float64]

#: a query is coarse when some row holds more variables than this
COARSE_ROW = 64
#: Newton steps by a dense solve up to this many dual rows, by conjugate gradients beyond
DENSE_ROWS = 800
#: conjugate gradients stop at this relative residual (an inexact Newton step: the line search
#: keeps the ascent, the dual's stopping rule is unchanged). 1e-2, not 1e-3: about a third fewer
#: conjugate-gradient iterations for a few more Newton steps: 1.2 times less CPU over a DHC
#: replicate of S46 (``benchmarks/bench_fit_route.py --knob CG_RTOL``), 1.5 times over the
#: seven-level test's state
CG_RTOL = 1e-2
#: the preconditioner is rebuilt after a solve of more than this many iterations beyond twice
#: those of its first solve
REBUILD_CG = 10


@dataclass
class CoarseProx:
    """The proximal step of the module docstring: the rows as a sparse ``(n_variables, n_rows)``
    matrix ``bt`` (coarse rows, then bounded groups with entries ``−1``), their right-hand sides
    ``c`` (``y_r``, then ``−lower_g``), ``inv_w`` (``1/w_r``, then 0), ``bounded`` (the ``ν``
    columns, kept ``≥ 0``); ``tol`` the largest dual gradient (people per row) left; ``kind``
    the rows' kinds (:meth:`_preconditioner`); ``unit`` the variables' units, if they are
    non-decreasing and each row holds one unit's variables (:class:`SegmentSums` by pieces)."""

    proj: Segments
    segment: IntArray
    bt: sparse.csr_matrix
    c: FloatArray
    inv_w: FloatArray
    bounded: npt.NDArray[np.bool_]
    lip: float
    tol: float
    kind: IntArray | None = None
    unit: IntArray | None = None
    max_newton: int = 60
    max_cg: int = 200
    eta: FloatArray = field(init=False)
    newton: int = field(default=0, init=False)
    cg: int = field(default=0, init=False)
    exact: bool = field(default=False, init=False)
    stuck: bool = field(default=False, init=False)
    row_size: FloatArray = field(init=False)
    _pre: Callable[[FloatArray], FloatArray] | None = field(default=None, init=False)
    _stale: bool = field(default=False, init=False)
    _fresh: int = field(default=-1, init=False)
    _pre_rows: IntArray = field(default_factory=lambda: np.zeros(0, np.int64), init=False)

    def __post_init__(self) -> None:
        self.eta = np.zeros(self.c.size)
        self.row_size = np.asarray(abs(self.bt).sum(axis=0), dtype=np.float64).ravel()

    def _primal(self, eta: FloatArray, u: FloatArray) -> tuple[FloatArray, FloatArray, float]:
        """x(η), the dual gradient and the dual value."""
        x = self._project(u - (self.bt @ eta) / self.lip)
        bx = self.bt.T @ x
        grad = bx - self.c - self.inv_w * eta
        diff = x - u
        value = 0.5 * self.lip * float(diff @ diff) + float(eta @ (bx - self.c))
        value -= 0.5 * float((self.inv_w * eta) @ eta)
        return x, grad, value

    def _project(self, v: FloatArray) -> FloatArray:
        """Projection onto the segments; one segment (the State) by Michelot's fixed point
        (``τ = (Σ_{v > τ} v − target) / #{v > τ}`` until the set is stable, exact, no sort)."""
        if self.proj.target.size != 1 or not v.size:
            return self.proj.project(v)
        total = float(self.proj.target[0])
        if total <= 0:
            return np.zeros_like(v)
        sub = v  # the candidates above τ: τ only grows, so the set only shrinks
        tau = (float(sub.sum()) - total) / sub.size
        for _ in range(v.size):
            nxt = sub[sub > tau]
            if nxt.size == sub.size:
                break
            sub = nxt
            tau = (float(sub.sum()) - total) / sub.size
        return np.maximum(v - tau, 0.0)

    def _pgrad(self, eta: FloatArray, grad: FloatArray) -> FloatArray:
        """The projected gradient (ascent, ``ν ≥ 0``)."""
        pg = grad.copy()
        b = self.bounded
        pg[b] = np.maximum(eta[b] + grad[b], 0.0) - eta[b]
        return pg

    def _parts(
        self, x: FloatArray
    ) -> tuple[sparse.csr_matrix, IntArray, FloatArray, FloatArray, SegmentSums]:
        """At the projection ``x``: the positive variables' rows, their segment (renumbered), the
        segments' sizes, the diagonal shift and the rows' sums per segment (``S B``, by pieces:
        :class:`SegmentSums`). The shift is ``inv_w``, a floor for rows without positive
        variables (curvature as if they had them) and a relative ridge for dependent rows, e.g. a
        group holding all of its segments' positive variables."""
        free = np.flatnonzero(x > 0)
        bf = self.bt if free.size == x.size else self.bt[free].tocsr()  # all free: no copy
        m = self.c.size
        seg = self.segment[free]
        present = np.zeros(int(self.segment.max(initial=-1)) + 1, dtype=bool)
        present[seg] = True
        s = (np.cumsum(present) - 1)[seg]  # the segments renumbered, in order (no sort)
        del seg, present
        cnt = np.bincount(s).astype(np.float64)
        d1 = square_sums(bf, m)
        unit = self.unit if self.unit is None or free.size == x.size else self.unit[free]
        sums = SegmentSums(bf, s, cnt.size, unit)
        inv_cnt = 1.0 / np.maximum(cnt, 1.0)
        d2 = np.zeros(m)
        for piece in sums.pieces():  # each row's additions in one piece, in the same order
            square_sums_by_row(piece, inv_cnt, m, out=d2)
        diag = (d1 - d2) / self.lip + self.inv_w
        floor = 1e-3 * self.row_size / self.lip + 1e-12
        shift = self.inv_w + np.maximum(floor - diag, 0.0) + 1e-10 * float(diag.max(initial=0.0))
        return bf, s, cnt, shift, sums

    def _hessian(self, x: FloatArray) -> FloatArray:
        """``B J Bᵀ / L + diag(inv_w)`` at the projection ``x`` (minus the dual's Hessian), dense."""
        bf, _, cnt, shift, sums = self._parts(x)
        h = np.asarray((bf.T @ bf).todense(), dtype=np.float64)
        if cnt.size:  # the sums: (segments, rows), sparse, whole (at most DENSE_ROWS rows)
            ss = sums.whole()
            h -= np.asarray((ss.T @ sparse.diags(1.0 / cnt) @ ss).todense(), dtype=np.float64)
        h /= self.lip
        h[np.diag_indices_from(h)] += shift
        return h

    def _direction(self, x: FloatArray, grad: FloatArray, on: npt.NDArray[np.bool_]) -> FloatArray:
        """The Newton step ``H⁻¹ grad`` on the free dual coordinates: dense for at most
        :data:`DENSE_ROWS` rows, else by conjugate gradients to :data:`CG_RTOL` (an inexact Newton
        step, still an ascent direction) with :meth:`_preconditioner`, kept while it serves: it is
        rebuilt at the projection of the moment when the free rows change or the last solve took
        :data:`REBUILD_CG` iterations more than twice its first."""
        d = np.zeros_like(grad)
        idx = np.flatnonzero(on)
        if self.c.size <= DENSE_ROWS:
            h = self._hessian(x)[np.ix_(idx, idx)]
            try:
                d[idx] = np.linalg.solve(h, grad[idx])
            except np.linalg.LinAlgError:
                d[idx] = np.linalg.lstsq(h, grad[idx], rcond=None)[0]
            return d
        bf, s, cnt, shift, sums = self._parts(x)
        m = self.c.size
        part = idx.size < m  # some bounds' rows fixed: B's columns on ``idx`` only, not copied
        # Bᵀ z as the product of B's transpose (scipy's CSC product, no copy: each row's sum
        # adds its variables in increasing order, as a stored CSR Bᵀ did)
        bot = bf.T
        sh = shift[idx]
        inv_cnt = 1.0 / np.maximum(cnt, 1.0)

        def hv(v: FloatArray) -> FloatArray:
            if part:  # B v over all the columns, zero off ``idx``: each row's sum the same
                full = np.zeros(m)
                full[idx] = v
                v_all = full
            else:
                v_all = v
            z = bf @ v_all
            if cnt.size:
                z = z - (np.bincount(s, weights=z, minlength=cnt.size) * inv_cnt)[s]
            bz = np.asarray(bot @ z, dtype=np.float64)
            return (bz[idx] if part else bz) / self.lip + sh * v

        if self._pre is None or self._stale or not np.array_equal(self._pre_rows, idx):
            kind = None if self.kind is None else self.kind[idx]
            self._pre = self._preconditioner(bf, sums, cnt, sh, kind, idx if part else None)
            self._pre_rows, self._stale, self._fresh = idx, False, -1
        pv = self._pre

        k = idx.size
        op = splinalg.LinearOperator((k, k), matvec=hv, dtype=np.float64)
        m_op = splinalg.LinearOperator((k, k), matvec=pv, dtype=np.float64)
        its = [0]

        def count(_: FloatArray) -> None:
            its[0] += 1

        d[idx], _ = splinalg.cg(
            op, grad[idx], M=m_op, rtol=CG_RTOL, maxiter=self.max_cg, callback=count
        )
        self.cg += its[0]
        if self._fresh < 0:
            self._fresh = its[0]  # the iterations the preconditioner takes when built
        self._stale = its[0] > REBUILD_CG + 2 * self._fresh
        return d

    def _preconditioner(
        self,
        bf: sparse.csr_matrix,
        sums: SegmentSums,
        cnt: FloatArray,
        shift: FloatArray,
        kind: IntArray | None,
        rows: IntArray | None = None,
    ) -> Callable[[FloatArray], FloatArray]:
        """An approximate inverse of the Hessian ``H`` on the free dual rows (``bf`` their columns
        on the positive variables, ``sums`` / ``cnt`` the rows' sums per
        segment and the segments' sizes, ``shift`` the rows' diagonal): ``P = BᵀB / L +
        diag(shift)`` (``H`` without its segment term; block-diagonal by unit, rows of different
        units share no variable), by a sparse LU, and — where rows of many units share a ``kind``
        — a balancing coarse correction (Mandel's balancing Neumann–Neumann, ``M = (I − Z E⁻¹ Zᵀ
        H) P⁻¹ (I − H Z E⁻¹ Zᵀ) + Z E⁻¹ Zᵀ``, ``Z`` the kinds' indicators, ``E = Zᵀ H Z``): the
        sum over the children of one query cell's rows is the parent's, fixed by the segments, so
        ``H`` is nearly flat along those sums (curvature ``1/w`` against ``row size / L``) and
        ``P`` alone misses exactly these directions. ``H Z = (BᵀB Z − (S B)ᵀ diag(1/cnt) (S B) Z)
        / L + diag(shift) Z`` is formed in the rows' space (no product as long as the variables).
        With ``rows``, the free dual rows are those columns of ``bf`` and ``sums`` (``shift`` and
        ``kind`` given on them): the same as on copies of those columns, without the copies."""
        m = shift.size
        btb = gram(bf)
        if rows is not None:
            btb = btb[rows][:, rows]
        p = btb / self.lip + sparse.diags(shift)
        lu = splinalg.splu(sparse.csc_matrix(p))
        if kind is None:
            return lu.solve
        _, kind = np.unique(kind, return_inverse=True)
        nk = int(kind.max(initial=-1)) + 1
        if nk >= m or nk == 0:
            return lu.solve
        z = sparse.csr_matrix((np.ones(m), (np.arange(m), kind)), shape=(m, nk))
        hz_s = btb @ z
        if cnt.size:
            if rows is None:
                hz_s = hz_s - sums.weighted_gram(1.0 / cnt, z)
            else:  # Z on all of sums' columns (zero off ``rows``), the product's rows on them
                z_all = sparse.csr_matrix((np.ones(m), (rows, kind)), shape=(bf.shape[1], nk))
                hz_s = hz_s - sums.weighted_gram(1.0 / cnt, z_all).tocsr()[rows]
        # H Z, kept sparse: a row's kinds are those of the rows sharing its variables or their
        # segments, a few of the kinds (a DHC Block part: 1 % of a dense (rows, kinds) array,
        # whose two products were 95 % of a preconditioned step)
        hz = sparse.csr_matrix(hz_s / self.lip + z.multiply(shift[:, None]))
        e = np.asarray((z.T @ hz).todense(), dtype=np.float64)
        e = 0.5 * (e + e.T)
        e_inv = np.linalg.pinv(e, hermitian=True)
        zt, hzt = z.T.tocsr(), hz.T.tocsr()

        def apply(v: FloatArray) -> FloatArray:
            zv = e_inv @ (zt @ v)
            r = lu.solve(v - hz @ zv)
            return r - z @ (e_inv @ (hzt @ r)) + z @ zv

        return apply

    def __call__(self, u: FloatArray, loose: float = 0.0) -> FloatArray:
        """The proximal point of ``u`` (module docstring); the multipliers stay in ``eta``. With
        ``loose`` > ``tol``, the dual stops at that gradient (an inexact proximal point, warm-started
        from the last): :attr:`exact` says whether it also meets ``tol``."""
        eta = self.eta
        x, grad, value = self._primal(eta, u)
        fp = 1e-12 * np.abs(self.c)  # floating point's share of a row
        enough = max(self.tol, loose) + fp
        self.stuck = False
        for _ in range(self.max_newton):
            if (np.abs(self._pgrad(eta, grad)) <= enough).all():
                break
            self.newton += 1
            fixed = self.bounded & (eta <= 0) & (grad <= 0)
            on = ~fixed
            d = self._direction(x, grad, on)
            t = 1.0
            while True:
                new = eta + t * d
                new[self.bounded] = np.maximum(new[self.bounded], 0.0)
                x2, g2, v2 = self._primal(new, u)
                slack = 1e-12 * (1.0 + abs(value))
                if v2 >= value + 1e-4 * float(grad @ (new - eta)) - slack or t < 1e-8:
                    break
                t *= 0.5
            if t < 1e-8 and v2 < value - slack:
                self.stuck = True
                break  # no ascent left at floating-point precision
            eta, x, grad, value = new, x2, g2, v2
        self.exact = self.stuck or bool((np.abs(self._pgrad(eta, grad)) <= self.tol + fp).all())
        self.eta = eta
        return x


def coarse_terms(inv: list[RowArray], n_rows: list[int]) -> tuple[list[int], list[int]]:
    """Indices of the coarse and of the fine terms (a coarse term has a row of more than
    :data:`COARSE_ROW` variables)."""
    coarse: list[int] = []
    fine: list[int] = []
    for i, (v, n) in enumerate(zip(inv, n_rows, strict=True)):
        big = v.size and int(np.bincount(v, minlength=n).max()) > COARSE_ROW
        (coarse if big else fine).append(i)
    return coarse, fine


def constraint_rows(
    n: int,
    inv: list[RowArray],
    y: list[FloatArray],
    weight: list[float],
    gv: IntArray,
    gg: IntArray,
    low: FloatArray,
) -> tuple[sparse.csr_matrix, FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """``bt``, ``c``, ``inv_w``, ``bounded`` of :class:`CoarseProx`: the coarse terms' rows (term
    ``i``'s variable ``v`` in row ``inv[i][v]``), then the bounded groups (``gv`` their variables,
    ``gg`` their group, ``low`` the bounds)."""
    # CSR built directly (no COO triplets: a Tract_Subset part of 10⁷ variables holds ~8 entries
    # each): every variable has one entry per term, in term order, then its group's if bounded;
    # the columns of a variable's entries increase (term offsets, then the groups after them)
    c, inv_w, offs = [], [], []
    off = 0
    for yy, w in zip(y, weight, strict=True):
        c.append(yy)
        inv_w.append(np.full(yy.size, 1.0 / w))
        offs.append(off)
        off += yy.size
    c.append(-low)
    inv_w.append(np.zeros(low.size))
    m = off + low.size
    counts = np.full(n, len(inv), dtype=np.int64)
    counts[gv] += 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    idx_type = np.int32 if max(m, int(indptr[-1])) < np.iinfo(np.int32).max else np.int64
    indices = np.empty(int(indptr[-1]), dtype=idx_type)
    data = np.ones(int(indptr[-1]))
    start = indptr[:-1]
    for k, (v, o) in enumerate(zip(inv, offs, strict=True)):
        indices[start + k] = v.astype(idx_type, copy=False) + o
    indices[start[gv] + len(inv)] = gg + off
    data[start[gv] + len(inv)] = -1.0
    bt = sparse.csr_matrix((data, indices, indptr.astype(idx_type)), shape=(n, m))
    bounded = np.zeros(m, dtype=bool)
    bounded[off:] = True
    return bt, np.concatenate(c), np.concatenate(inv_w), bounded
