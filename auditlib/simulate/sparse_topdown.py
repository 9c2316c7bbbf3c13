"""TopDown on sparse production-schema histograms (one state): every query of the allocation
measured, a least-squares fit on the cells that can be non-zero, and controlled rounding.

The DAS's steps and what stands in for each here (``das_decennial/programs`` of the Bureau's DAS):

1. **Measurements** (``engine/topdown_engine.py``, ``queries/querybase.py``): every query of the
   level's strategy on every geounit, ``N_Z(0, σ²)`` noise on every query cell. Here too, except that
   noise is only drawn for the query cells the fit can touch (a row whose detailed cells are all held
   at 0 below adds a constant to the objective): the same distribution of every released number.
2. **L2 fit** (``optimization/l2_plb_optimizer.py``, multipass ``l2_query_ordering`` with each pass
   constraining the next): one weighted least-squares pass over all the level's queries (weights
   ``1/σ²``) — the multipass ordering is not reproduced. The fit runs over the cells a child can hold:
   a child of a parent is non-zero only where its parent's final histogram is (children sum to it
   and are ≥ 0, so nothing is lost), and only in unit types it has units of (the DAS's
   ``hhgq_total_ub``: no housing unit or facility of a type, nobody in it). Solved by accelerated
   projected gradient (FISTA; step ``1/L`` with ``L = Σ_q max row size / σ_q²``), whose projection
   is exact: onto ``{x ≥ 0, Σ_children x = parent}`` per parent cell (the state: ``Σ x = total``,
   the state total invariant). The DAS uses Gurobi's barrier QP with the same constraints.
3. **Rounding** (``optimization/l1_plb_optimizer.py``, multipass ``rounder_query_ordering``: L1 toward
   the real-valued answers of e.g. total, hhgq, hhgq × hispanic, …, detailed, each pass constraining
   the next): controlled rounding (:func:`~auditlib.simulate.rounding.round_controlled`) — every
   detailed cell and every child's total within one of the fitted values, the children summing to
   the parent exactly in every cell: the ordering total → detailed of the DAS's rounder, without the
   intermediate queries.
4. **Invariants and constraints** (``constraints/Constraints_PL94.py``): the state total is exact;
   ``hhgq_total_ub`` (nobody in a type without units) holds at every level; ``hhgq_total_lb`` (at
   least one person per facility) is *not* imposed — ``invariant_violations``
   (:mod:`auditlib.geography.sparse_histograms`) counts the blocks that break it; ``nurse_nva_0``
   (no minors in nursing facilities) is not imposed either, nor are the DHC's age × relgq structural
   zeros (``Constraints_DHCP.py``) and its household constraints.
5. **Levels**: one state's run starts at State; the DAS's US run starts at the nation (the US
   level's measurements and the national histogram's split into states are not simulated). The
   DHC's Prim and Tract_Subset_Group levels are not in the spine; its Tract_Subset stands on the
   spine's tracts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError
from auditlib.geography.schema import schema
from auditlib.geography.sparse_histograms import (
    GQInvariants,
    SparseHistograms,
    from_keys,
    unit_types,
)
from auditlib.mechanisms import discrete_gaussian_sampler
from auditlib.simulate.postprocess import Segments, round_preserving
from auditlib.simulate.rounding import round_controlled

#: keyed stream of sparse TopDown noise: (SPARSE_TOPDOWN_NOISE, state, level, replicate)
SPARSE_TOPDOWN_NOISE = 33

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Measured = Sequence[Sequence[tuple[str, float]]]


@dataclass(frozen=True)
class SparseTopDownRelease:
    """Per level (top first): true and released sparse histograms, and FISTA iterations."""

    levels: tuple[str, ...]
    truth: list[SparseHistograms]
    dp: list[SparseHistograms]
    iterations: list[int]

    def answers(self, level: int, query: str) -> tuple[IntArray, IntArray]:
        """(released, true) answers ``(n_units, n_query_cells)`` of a query at ``level``."""
        return self.dp[level].answers(query), self.truth[level].answers(query)


def _allowed(
    cells: IntArray, unit: IntArray, units: npt.NDArray[np.int32], schema_name: str
) -> npt.NDArray[np.bool_]:
    """Whether ``unit`` has housing units / facilities of the unit type of each cell."""
    _, axis, level_type, _ = unit_types(schema_name)
    sch = schema(schema_name)
    stride = int(np.prod(sch.shape[axis + 1 :], dtype=np.int64))
    t = level_type[(cells // stride) % sch.shape[axis]]
    return units[unit, t] > 0


@dataclass
class _Fit:
    """One level's least-squares problem over variables (unit, cell) with segment constraints."""

    unit: IntArray
    cell: IntArray
    segment: IntArray
    target: FloatArray

    def measure(
        self, truth: SparseHistograms, level: Sequence[tuple[str, float]], rng: np.random.Generator
    ) -> list[Term]:
        """Noisy answers of every query on the rows the variables touch (see the module docstring)."""
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
            terms.append(Term(q, inv.astype(np.int64), true + noise, 1.0 / float(sigma2)))
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

    def solve(self, terms: list[Term], *, max_iter: int, tol: float) -> tuple[FloatArray, int]:
        """Weighted least squares over ``{x ≥ 0, Σ_segment x = target}``: FISTA with adaptive
        restart (O'Donoghue & Candès); stops when no variable moves by more than ``tol``."""
        proj = Segments(self.segment, self.target)
        if not self.unit.size:
            return np.zeros(0), 0
        live = [t for t in terms if not self.constant_rows(t)]  # e.g. the state's total
        lip = sum(float(np.bincount(t.inv).max()) * t.weight for t in live) or 1.0

        def grad(v: FloatArray) -> FloatArray:
            g = np.zeros_like(v)
            for t in live:
                g += t.weight * (np.bincount(t.inv, weights=v, minlength=t.y.size) - t.y)[t.inv]
            return g

        x = proj.project(np.zeros(self.unit.size))
        w, k = x.copy(), 1.0
        step = np.inf
        for it in range(1, max_iter + 1):
            g = grad(w)
            x_new = proj.project(w - g / lip)
            step = float(np.max(np.abs(x_new - x)))
            if float(g @ (x_new - x)) > 0:  # momentum points uphill: restart
                k = 1.0
            k_new = (1.0 + np.sqrt(1.0 + 4.0 * k * k)) / 2.0
            w = x_new + ((k - 1.0) / k_new) * (x_new - x)
            x, k = x_new, k_new
            if step < tol:
                return x, it
        raise InvalidParameterError(
            f"Sparse TopDown fit did not converge: step {step:.3g} > tol {tol} after max_iter = "
            f"{max_iter}; raise max_iter or tol"
        )


@dataclass(frozen=True)
class Term:
    """One query's measurements: each variable's row ``inv``, the noisy row answers ``y``, 1/σ²."""

    query: str
    inv: IntArray
    y: FloatArray
    weight: float


def _aggregate_units(
    units: npt.NDArray[np.int32], parent: IntArray, n: int
) -> npt.NDArray[np.int32]:
    out = np.zeros((n, units.shape[1]), dtype=np.int64)
    np.add.at(out, parent, units.astype(np.int64))
    return out.astype(np.int32)


def _child_variables(up: SparseHistograms, parent: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """For every child and every non-zero cell of its parent: (child, cell, parent entry)."""
    per_parent = np.diff(up.indptr)
    k = per_parent[parent]
    child = np.repeat(np.arange(parent.size, dtype=np.int64), k)
    start = np.repeat(up.indptr[parent], k)
    offset = np.arange(child.size, dtype=np.int64) - np.repeat(np.cumsum(k) - k, k)
    entry = start + offset
    return child, up.cells[entry].astype(np.int64), entry


def _round_children(
    x: FloatArray, child: IntArray, entry: IntArray, up: SparseHistograms, parent: IntArray
) -> IntArray:
    """Controlled rounding per parent over the parent's non-zero cells (local columns); the
    variables are sorted by child."""
    out = np.zeros(x.size, dtype=np.int64)
    per_parent = np.diff(up.indptr)
    width = int(per_parent.max()) if per_parent.size else 0
    if width == 0:
        return out
    n_children = parent.size
    local = entry - up.indptr[parent[child]]
    budget = max(1, (1 << 22) // width)  # rows per chunk
    c0 = 0
    while c0 < n_children:
        # whole parents, about `budget` children
        p0 = int(parent[c0])
        c_end = min(c0 + budget, n_children)
        p1 = int(parent[c_end - 1]) + 1
        c1 = int(np.searchsorted(parent, p1))
        sel = slice(*np.searchsorted(child, [c0, c1]))  # variables are sorted by child
        xs = np.zeros((c1 - c0, width))
        xs[child[sel] - c0, local[sel]] = x[sel]
        ups = np.zeros((p1 - p0, width), dtype=np.int64)
        pe = np.arange(up.indptr[p0], up.indptr[p1])
        pe_parent = np.repeat(np.arange(p0, p1), per_parent[p0:p1])
        ups[pe_parent - p0, pe - up.indptr[pe_parent]] = up.counts[pe]
        ys = round_controlled(xs, parent[c0:c1] - p0, ups)
        out[sel] = ys[child[sel] - c0, local[sel]]
        c0 = c1
    return out


def sparse_topdown(
    parents: Sequence[IntArray],
    levels: Sequence[str],
    blocks: SparseHistograms,
    invariants: GQInvariants,
    measured: Measured,
    rngs: Sequence[np.random.Generator],
    *,
    max_iter: int = 20_000,
    tol: float = 1e-4,
) -> SparseTopDownRelease:
    """One TopDown release of a state (module docstring): ``levels`` top first (one top unit),
    ``parents[i]`` the parent (at ``levels[i]``) of every unit of ``levels[i + 1]`` (children
    grouped by parent), ``blocks`` the bottom level's true histograms, ``measured[i]`` the
    ``(query, σ²)`` of level ``i`` (schema names), ``rngs[i]`` its noise."""
    n_levels = len(levels)
    if not (len(parents) == n_levels - 1 == len(measured) - 1 == len(rngs) - 1):
        raise InvalidParameterError(
            f"Invalid sparse TopDown: {n_levels} levels need {n_levels - 1} parent arrays and "
            f"{n_levels} measured levels and generators; got {len(parents)}, {len(measured)}, "
            f"{len(rngs)}"
        )
    if invariants.schema_name != blocks.schema_name or invariants.units.shape[0] != blocks.n_units:
        raise InvalidParameterError(
            "Invalid invariants: they must be the blocks' (same schema, one row per block)"
        )
    for i, p in enumerate(parents):
        if (np.diff(p) < 0).any():
            raise InvalidParameterError(
                f"Invalid parents of {levels[i + 1]!r}: children must be grouped by parent (sorted)"
            )
    # truth and unit counts of every level, bottom up
    truth = [blocks]
    units = [invariants.units]
    for p in reversed(parents):
        n_up = int(p.max()) + 1 if p.size else 1
        truth.insert(0, truth[0].aggregate(p, n_up))
        units.insert(0, _aggregate_units(units[0], p, n_up))
    if truth[0].n_units != 1:
        raise InvalidParameterError("Invalid hierarchy: the top level must have one unit")
    sch = blocks.schema
    name = blocks.schema_name
    dp: list[SparseHistograms] = []
    iterations: list[int] = []
    for i in range(n_levels):
        if i == 0:
            cell = np.arange(sch.n_cells, dtype=np.int64)
            unit = np.zeros(sch.n_cells, dtype=np.int64)
            keep = _allowed(cell, unit, units[0], name)
            fit = _Fit(
                unit[keep], cell[keep], np.zeros(int(keep.sum()), np.int64),
                np.array([float(invariants.state_total)]),
            )  # fmt: skip
        else:
            child, cell, entry = _child_variables(dp[i - 1], parents[i - 1])
            keep = _allowed(cell, child, units[i], name)
            child, cell, entry = child[keep], cell[keep], entry[keep]
            fit = _Fit(child, cell, entry, dp[i - 1].counts.astype(np.float64))
        x, its = fit.solve(fit.measure(truth[i], measured[i], rngs[i]), max_iter=max_iter, tol=tol)
        if i == 0:
            y = round_preserving(x, fit.segment, fit.target)
        else:
            y = _round_children(x, fit.unit, fit.segment, dp[i - 1], parents[i - 1])
        nz = y > 0
        keys = fit.unit[nz] * sch.n_cells + fit.cell[nz]
        order = np.argsort(keys, kind="stable")
        n_units = truth[i].n_units
        dp.append(from_keys(name, keys[order], y[nz][order], n_units))
        iterations.append(its)
    return SparseTopDownRelease(tuple(levels), truth, dp, iterations)


def noise_rngs(
    seed: int, state: int, n_levels: int, replicate: int = 0
) -> list[np.random.Generator]:
    """One keyed generator per level: ``(SPARSE_TOPDOWN_NOISE, state, level, replicate)``."""
    return [
        seeds.rng(seed, SPARSE_TOPDOWN_NOISE, int(state), i, int(replicate))
        for i in range(n_levels)
    ]
