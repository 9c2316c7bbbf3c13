"""One level's least-squares fit of the sparse TopDown (:mod:`auditlib.simulate.sparse_topdown`).

Variables are the (unit, cell) pairs a unit can hold: cells its parent holds, of unit types it has
units of, and not structural zeros. The fit minimises ``½ Σ_q ‖Q_q x − y_q‖² / σ_q²`` over

* ``x ≥ 0`` and ``Σ_{variables of a segment} x = target`` (a segment is a parent's cell: children
  sum to their parent; at the state one segment, the total invariant), and
* ``Σ_{variables of a group} x ≥ lower`` (a group is a unit's cells of one unit type: the DAS's
  ``hhgq_total_lb``, at least one person per group-quarters facility).

The first set has an exact projection (:class:`~auditlib.simulate.postprocess.Segments`); the lower
bounds couple the segments, so they enter by an augmented Lagrangian (:meth:`_Fit.solve`: FISTA on the
segments for fixed multipliers, then a multiplier step, until the bounds hold to ``feas_tol``) and
:func:`~auditlib.simulate.sparse_repair.repair_lower` then moves the last fractions of a person,
within each segment, from groups above their bound to groups below it, so that the fitted values
satisfy every bound exactly (up to floating point) before rounding.

When queries with rows of many variables dominate the Lipschitz constant (their ``max row / σ²``
more than :data:`COARSE_RATIO` times the others', e.g. the DHC's State), and their rows and the
bounded groups number at most :data:`MAX_DUAL_ROWS`, :meth:`_Fit.solve` runs FISTA on the other
queries only, with those rows and the group bounds solved exactly in the proximal step
(:mod:`auditlib.simulate.sparse_coarse`): same objective, same constraints, same stopping rule, the
bounds met by the fit itself (no augmented-Lagrangian rounds).

A problem of fewer than :data:`SCREEN_PEOPLE` people a variable (most fitted values zero: the
DHC's Block parts, a State of few people) is solved on a working set of its variables after a
few steps of its route over all of them (:mod:`auditlib.simulate.sparse_fista`), each set by the
route it needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.geography.sparse_histograms import SparseHistograms
from auditlib.mechanisms import discrete_gaussian_sampler
from auditlib.simulate.postprocess import Segments
from auditlib.simulate.sparse_coarse import CoarseProx, coarse_terms, constraint_rows
from auditlib.simulate.sparse_fista import (
    NotConverged,
    augmented_lagrangian,
    fista,
    working_set_solve,
)
from auditlib.simulate.sparse_parts import PartMap, ranges, start_parts
from auditlib.simulate.sparse_sums import one_unit_rows
from auditlib.simulate.sparse_terms import TermsGradient

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
#: a term's rows of the variables: int32 while they fit (a large problem holds one per variable
#: and term: S32's DHC County, 14 M variables × 10 terms), else int64
RowArray = npt.NDArray[np.signedinteger[Any]]
#: the bounded groups' variables, their (compact) groups, bounds and ids (:meth:`_Fit._bounded`)
_Bounded = tuple[IntArray, IntArray, FloatArray, IntArray]

#: the coarse rows go to the dual (:mod:`.sparse_coarse`) when their Lipschitz constant exceeds
#: the fine terms' this many times, and there are at most MAX_DUAL_ROWS of them (rows and bounds).
#: At 10 the DHC's Block parts (ratios ≈ 27–50) and PL94's Tract parts (≈ 11–18) of real spine
#: states took 1.5–1.9 times less CPU (``benchmarks/bench_fit_route.py``), but the Prim-rich test
#: state of ``tests/unit/test_sparse_topdown_prims.py`` 2–3 times more: the ratio alone does not
#: tell which route is cheaper there, so the threshold stays at 100
COARSE_RATIO = 100.0
MAX_DUAL_ROWS = 200_000
#: the dual of a proximal step is solved to this fraction of FISTA's last step (people per row;
#: warm-started: an inexact proximal point whose error vanishes as FISTA converges), and exactly
#: once the step is below ``tol``
INEXACT = 0.1
#: problems of at most this many variables are solved on all of them (no working set)
SCREEN_MIN = 2_000
#: a problem of fewer people a variable than this is solved on a working set first: its fitted
#: values are mostly zero (DHC Block parts, 0.05–0.08 people a variable: 87–97 % zero; the DHC
#: State of a 5 % spine, 0.15: 96 %; levels of 0.5–2.8 people a variable: 21–71 % zero)
SCREEN_PEOPLE = 0.25
#: steps over every variable before the first working set: FISTA's, or the dual route's
SCREEN_FIRST = 30
SCREEN_FIRST_DUAL = 5


def _rows(inv: npt.NDArray[np.integer]) -> RowArray:
    """Rows as int32 while they fit (half the memory of int64; the same values)."""
    if inv.size == 0 or int(inv.max()) < np.iinfo(np.int32).max:
        return inv.astype(np.int32, copy=False)
    return inv.astype(np.int64, copy=False)


@dataclass(frozen=True)
class Term:
    """One query's measurements: each variable's row ``inv`` (:data:`RowArray`), the noisy row
    answers ``y``, 1/σ², and each row's query cell ``row_cell`` (rows of different units share
    it)."""

    query: str
    inv: RowArray
    y: FloatArray
    weight: float
    row_cell: IntArray | None = None


@dataclass
class _Fit:
    """One level's least-squares problem over variables (unit, cell) with segment constraints and
    optional group lower bounds (``group[v]`` the group of variable ``v``, ``lower[g]`` its bound,
    ``group_type[g]`` its unit type); ``parent[v]`` the parent of variable ``v``'s unit, if the
    problem may be solved by parts (:meth:`solve`)."""

    unit: IntArray
    cell: IntArray
    segment: IntArray
    target: FloatArray
    group: IntArray | None = None
    lower: FloatArray | None = None
    group_type: IntArray | None = None
    parent: IntArray | None = None
    outer: int = field(default=0, init=False)
    mu: FloatArray = field(default_factory=lambda: np.zeros(0), init=False)
    rho: float = field(default=0.0, init=False)
    newton: int = field(default=0, init=False)
    cg: int = field(default=0, init=False)
    route: str = field(default="", init=False)
    ratio: float = field(default=0.0, init=False)
    working: int = field(default=0, init=False)  # variables of the (largest) last working set
    sets: int = field(default=0, init=False)  # working sets solved (the most of any part)

    def measure(
        self, truth: SparseHistograms, level: Sequence[tuple[str, float]], rng: np.random.Generator
    ) -> list[Term]:
        """Noisy answers of every query on the rows the variables touch (see the module docstring
        of :mod:`auditlib.simulate.sparse_topdown`)."""
        sch = truth.schema
        t_unit = truth.unit_of_entry()
        t_cells = truth.cells.astype(np.int64)
        t_counts = truth.counts.astype(np.float64)
        terms = []
        for q, sigma2 in level:
            if not (np.isfinite(sigma2) and sigma2 > 0):
                raise InvalidParameterError(f"Invalid sigma2 {sigma2} for query {q!r}; need > 0")
            nq = sch.n_query_cells(q)
            rows = self.unit * nq + sch.cells_query_index(q, self.cell)
            touched, inv = np.unique(rows, return_inverse=True)
            t_rows = t_unit * nq + sch.cells_query_index(q, t_cells)
            true = np.zeros(touched.size)
            pos = np.minimum(np.searchsorted(touched, t_rows), max(touched.size - 1, 0))
            hit = touched[pos] == t_rows if touched.size else np.zeros(t_rows.size, bool)
            np.add.at(true, pos[hit], t_counts[hit])
            noise = discrete_gaussian_sampler(float(sigma2)).rvs(size=touched.size, rng=rng)
            terms.append(Term(q, _rows(inv), true + noise, 1.0 / float(sigma2), touched % nq))
        return terms

    def constant_rows(self, term: Term) -> bool:
        """Whether every row of the term is one whole segment (a sum the constraints fix)."""
        if not term.inv.size:
            return True
        first = np.zeros(term.y.size, dtype=np.int64) - 1
        first[term.inv] = self.segment
        same = bool((first[term.inv] == self.segment).all())
        return same and bool(
            (np.bincount(term.inv) == np.bincount(self.segment)[first[first >= 0]]).all()
        )

    def _bounded(self) -> tuple[IntArray, IntArray, FloatArray, IntArray]:
        """The variables in groups with a positive bound, their (compact) group, the bounds, and
        the groups' ids."""
        if self.group is None or self.lower is None:
            e = np.zeros(0, np.int64)
            return e, e, np.zeros(0), e
        on = self.lower[self.group] > 0
        gv = np.flatnonzero(on)
        used, gg = np.unique(self.group[gv], return_inverse=True)
        return gv, gg.astype(np.int64), self.lower[used].astype(np.float64), used

    def _row_kinds(self, big: list[Term], used: IntArray) -> IntArray | None:
        """The kind of each dual row (:class:`~auditlib.simulate.sparse_coarse.CoarseProx`): a
        coarse row's query and query cell, a bounded group's unit type; ``None`` if unknown."""
        if any(t.row_cell is None for t in big) or (used.size and self.group_type is None):
            return None
        kinds, off = [], 0
        for t in big:
            assert t.row_cell is not None
            kinds.append(t.row_cell + off)
            off += int(t.row_cell.max(initial=-1)) + 1
        if used.size:
            assert self.group_type is not None
            kinds.append(self.group_type[used].astype(np.int64) + off)
        return np.concatenate(kinds).astype(np.int64) if kinds else None

    def solve(
        self,
        terms: list[Term],
        *,
        max_iter: int,
        tol: float,
        feas_tol: float = 1e-3,
        max_outer: int = 40,
        pool: PartMap | None = None,
    ) -> tuple[FloatArray, int]:
        """Weighted least squares over the segments and the group bounds (module docstring): FISTA
        with adaptive restart (O'Donoghue & Candès), stopping when no variable moves by more than
        ``tol``, inside an augmented Lagrangian for the bounds; ``max_iter`` counts FISTA steps.
        With ``parent``, by independent parts of whole parents, in ``pool`` if given
        (:mod:`auditlib.simulate.sparse_parts`)."""
        return self.start(
            terms, max_iter=max_iter, tol=tol, feas_tol=feas_tol, max_outer=max_outer, pool=pool
        )()

    def start(
        self,
        terms: list[Term],
        *,
        max_iter: int,
        tol: float,
        feas_tol: float = 1e-3,
        max_outer: int = 40,
        pool: PartMap | None = None,
    ) -> Callable[[], tuple[FloatArray, int]]:
        """:meth:`solve` begun: a fit of several parts given to ``pool`` now; what returns its
        result (a fit of one part, or without a pool, is solved when that is called)."""
        kw: dict[str, Any] = {
            "max_iter": max_iter, "tol": tol, "feas_tol": feas_tol, "max_outer": max_outer,
        }  # fmt: skip
        parts = ranges(self.parent, self.unit.size)
        if len(parts) > 1:
            return start_parts(self, terms, parts, pool, **kw)
        return lambda: self._solve(terms, **kw)

    def _part(self, terms: list[Term], a: int, b: int) -> tuple[_Fit, list[Term], IntArray]:
        """The sub-problem of the variables ``[a, b)`` (whole parents: their segments, groups and
        rows are theirs alone), its terms, and its groups' indices in this problem."""
        return self._subset(terms, slice(a, b))

    def _subset(
        self, terms: list[Term], idx: slice | IntArray
    ) -> tuple[_Fit, list[Term], IntArray]:
        """The problem over the variables ``idx`` (in order; the others held at zero): their
        segments (same targets), groups (same bounds) and rows, its terms, and its groups' indices
        in this problem."""

        def compact(ids: npt.NDArray[np.integer]) -> tuple[IntArray, IntArray]:
            used = np.zeros(int(ids.max()) + 1 - int(ids.min()), dtype=bool)
            used[ids - ids.min()] = True
            return (np.cumsum(used) - 1)[ids - ids.min()], np.flatnonzero(used) + int(ids.min())

        seg, seg_ids = compact(self.segment[idx])
        groups = np.zeros(0, np.int64)
        group = lower = group_type = None
        if self.group is not None and self.lower is not None:
            group, groups = compact(self.group[idx])
            lower = self.lower[groups]
            group_type = None if self.group_type is None else self.group_type[groups]
        sub = _Fit(
            self.unit[idx], self.cell[idx], seg, self.target[seg_ids], group, lower, group_type
        )
        sub_terms = []
        for t in terms:
            inv, rows = compact(t.inv[idx])
            cells = None if t.row_cell is None else t.row_cell[rows]
            sub_terms.append(Term(t.query, _rows(inv), t.y[rows], t.weight, cells))
        return sub, sub_terms, groups

    def _solve(
        self,
        terms: list[Term],
        *,
        max_iter: int,
        tol: float,
        feas_tol: float,
        max_outer: int,
        x0: FloatArray | None = None,
        mu0: FloatArray | None = None,
        screen: bool = True,
    ) -> tuple[FloatArray, int]:
        """The fit as one problem, from ``x0`` (projected; default 0) and, on FISTA's route, the
        bounds' multipliers ``mu0`` (per group; default 0), by the route it needs (module
        docstring); ``screen``: a problem of few people a variable on a working set first
        (:meth:`_on_working_set`)."""
        proj = Segments(self.segment, self.target)
        self.mu = np.zeros(0 if self.lower is None else self.lower.size)
        self.rho = 0.0
        self.working = self.sets = 0
        if not self.unit.size:
            return np.zeros(0), 0
        live = [t for t in terms if not self.constant_rows(t)]  # e.g. the state's total
        gv, gg, low, used = self._bounded()
        big, small = coarse_terms([t.inv for t in live], [t.y.size for t in live])
        lips = [float(np.bincount(t.inv).max()) * t.weight for t in live]
        lip_fine = sum(lips[i] for i in small)
        n_dual = sum(live[i].y.size for i in big) + low.size
        self.ratio = sum(lips[i] for i in big) / lip_fine if lip_fine > 0 else np.inf
        bounded = (gv, gg, low, used)
        dual = None
        if lip_fine > 0 and self.ratio > COARSE_RATIO and n_dual <= MAX_DUAL_ROWS:
            dual = (proj, [live[i] for i in big], [live[i] for i in small], lip_fine, bounded)
        lip_f, its = sum(lips) or 1.0, 0
        try:
            if screen and self.unit.size > SCREEN_MIN:
                if float(self.target.sum()) < SCREEN_PEOPLE * self.unit.size:
                    x, its, done = self._on_working_set(
                        proj, live, lip_f, bounded, dual, max_iter=max_iter,
                        tol=tol, feas_tol=feas_tol, max_outer=max_outer,
                    )  # fmt: skip
                    if done:
                        return x, its
                    x0, mu0 = x, None
            if dual is not None:
                x, k = self._solve_dual(*dual, max_iter=max_iter - its, tol=tol, x0=x0)
            else:
                self.route = "fista"
                x, k = self._solve_fista(
                    proj, live, lip_f, bounded, x0=x0, mu0=mu0,
                    max_iter=max_iter - its, tol=tol, feas_tol=feas_tol, max_outer=max_outer,
                )  # fmt: skip
        except NotConverged as e:  # every step counted in max_iter
            raise NotConverged(e.step, tol, max_iter) from None
        return x, its + k

    def _on_working_set(
        self,
        proj: Segments,
        live: list[Term],
        lip_f: float,
        bounded: _Bounded,
        dual: tuple[Segments, list[Term], list[Term], float, _Bounded] | None,
        *,
        max_iter: int,
        tol: float,
        feas_tol: float,
        max_outer: int,
    ) -> tuple[FloatArray, int, bool]:
        """The fit on a working set of the variables
        (:func:`~auditlib.simulate.sparse_fista.working_set_solve`), from a few steps of the
        route the whole problem needs (``dual``: its arguments of :meth:`_solve_dual`); each set
        solved by the route it needs. Returns the values, the steps taken and whether they are
        the fit (not: continue from them over every variable)."""
        gv, gg, low, used = bounded
        n_g = low.size
        terms_grad = TermsGradient(live, self.unit.size)

        def whole(v: FloatArray) -> FloatArray:  # the bounds' part as the last solve left it
            g = terms_grad(v)
            if n_g:
                gap = low - np.bincount(gg, weights=v[gv], minlength=n_g)
                g[gv] -= np.maximum(0.0, self.mu[used] + self.rho * gap)[gg]
            return g

        def solve_on(idx: IntArray, start: FloatArray, left: int) -> tuple[FloatArray, int]:
            sub, sub_terms, groups = self._subset(live, idx)
            got = sub._solve(
                sub_terms, max_iter=left, tol=tol, feas_tol=feas_tol, max_outer=max_outer,
                x0=start, mu0=self.mu[groups] if groups.size else None, screen=False,
            )  # fmt: skip
            self.outer, self.rho = max(self.outer, sub.outer), sub.rho
            self.newton, self.cg = self.newton + sub.newton, self.cg + sub.cg
            self.route, self.working, self.sets = sub.route, idx.size, self.sets + 1
            if groups.size:
                self.mu[groups] = sub.mu
            return got

        self.outer = self.newton = self.cg = 0
        if dual is not None:  # its bounds' multipliers (rho 0) in whole()
            x, its = self._solve_dual(
                *dual, max_iter=min(SCREEN_FIRST_DUAL, max_iter), tol=tol, strict=False
            )
            converged = False
        else:
            x, its, step = fista(
                terms_grad, proj, lip_f, proj.project(np.zeros(self.unit.size)), tol=tol,
                max_iter=min(SCREEN_FIRST, max_iter),
            )  # fmt: skip
            converged = step < tol and not n_g  # FISTA's own stop, no bounds to meet
        curvature = sum(t.weight for t in live) or 1.0
        x, k, done = working_set_solve(
            whole, proj, curvature, gv, solve_on, x, converged=converged, tol=tol,
            max_iter=max_iter - its,
        )  # fmt: skip
        return x, its + k, done

    def _solve_fista(
        self,
        proj: Segments,
        live: list[Term],
        lip_f: float,
        bounded: _Bounded,
        *,
        x0: FloatArray | None,
        mu0: FloatArray | None,
        max_iter: int,
        tol: float,
        feas_tol: float,
        max_outer: int,
    ) -> tuple[FloatArray, int]:
        """FISTA on all the terms inside an augmented Lagrangian for the group bounds
        (:func:`~auditlib.simulate.sparse_fista.augmented_lagrangian`)."""
        gv, gg, low, used = bounded
        x = proj.project(np.zeros(self.unit.size) if x0 is None else x0)
        mu = np.zeros(low.size) if mu0 is None else np.asarray(mu0, np.float64)[used]
        x, its, self.outer, mu, rho = augmented_lagrangian(
            TermsGradient(live, self.unit.size), proj, lip_f, (gv, gg, low), x, mu,
            max_iter=max_iter, tol=tol, feas_tol=feas_tol, max_outer=max_outer,
        )  # fmt: skip
        if low.size:
            self.mu[used], self.rho = mu, rho
        return x, its

    def _solve_dual(
        self,
        proj: Segments,
        big: list[Term],
        small: list[Term],
        lip: float,
        bounded: tuple[IntArray, IntArray, FloatArray, IntArray],
        *,
        max_iter: int,
        tol: float,
        x0: FloatArray | None = None,
        strict: bool = True,
    ) -> tuple[FloatArray, int]:
        """FISTA on the fine terms with the coarse rows and the group bounds in the proximal step
        (:mod:`auditlib.simulate.sparse_coarse`); same stopping rule as :meth:`_solve`; not
        ``strict``: the last iterate after ``max_iter`` steps, converged or not."""
        self.route = "dual"
        gv, gg, low, used = bounded
        bt, c, inv_w, is_bound = constraint_rows(
            self.unit.size, [t.inv for t in big], [t.y for t in big], [t.weight for t in big],
            gv, gg, low,
        )  # fmt: skip
        one_unit = one_unit_rows(bt, self.unit)  # the sums per parent cell by pieces of units
        prox = CoarseProx(
            proj, self.segment, bt, c, inv_w, is_bound, lip, tol=1e-3 * tol,
            kind=self._row_kinds(big, used), unit=self.unit if one_unit else None,
        )  # fmt: skip

        grad = TermsGradient(small, self.unit.size)

        x = prox(proj.project(np.zeros(self.unit.size) if x0 is None else x0))
        w, k = x.copy(), 1.0
        its, step = 0, np.inf
        while its < max_iter:
            its += 1
            # the dual to a fraction of the last step (an inexact proximal point), then exact
            x_new = prox(w - grad(w) / lip, INEXACT * step)
            step = float(np.max(np.abs(x_new - x)))
            if float((w - x_new) @ (x_new - x)) > 0:  # momentum against the gradient map: restart
                k = 1.0
            k_new = (1.0 + np.sqrt(1.0 + 4.0 * k * k)) / 2.0
            w = x_new + ((k - 1.0) / k_new) * (x_new - x)
            x, k = x_new, k_new
            if step < tol and prox.exact:
                break
        else:
            if strict:
                raise NotConverged(step, tol, max_iter)
        self.outer, self.newton, self.cg = 1, prox.newton, prox.cg
        if self.lower is not None:
            self.mu[used] = prox.eta[is_bound]
        return x, its
