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
   and are ≥ 0, so nothing is lost), only in unit types it has units of (``hhgq_total_ub``: no
   housing unit or facility of a type, nobody in it), and never in a structural zero (step 4).
   Constraints as the DAS's: ``{x ≥ 0, Σ_children x = parent}`` per parent cell (the state:
   ``Σ x = total``, the state total invariant) and ``hhgq_total_lb`` per unit and group-quarters
   type (:mod:`auditlib.simulate.sparse_fit`). Solved by accelerated projected gradient (FISTA;
   step ``1/L``, ``L = Σ_q max row size / σ_q²``) with the exact projection onto the first set,
   inside an augmented Lagrangian for the lower bounds (where there are few people a variable,
   most are zero at the optimum: the fit runs on a working set of them,
   :mod:`auditlib.simulate.sparse_fista`), then an exact
   repair moving the last fractions within each parent cell
   (:func:`~auditlib.simulate.sparse_repair.repair_lower`). The DAS solves the same constrained
   QP with Gurobi's barrier method (to its tolerances), in passes
   (``optimization/l2_dataIndep_npass_optimizer.py``, ``DataIndQueriesL2NPass
   .optimizationPassesLoop``: each pass's queries fitted, then held to their estimates within a
   tolerance in the next). Where coarse queries dominate — the DHC's State: rows of 10⁴–5·10⁵
   cells at the detailed query's σ², ``L / μ ≈ 10⁶`` for FISTA — their ≈ 185 rows and the lower
   bounds go into FISTA's proximal step instead, solved exactly through its low-dimensional dual
   by Newton's method (:mod:`auditlib.simulate.sparse_coarse`), so FISTA only sees the fine
   queries (``L / μ ≈ 40``): the DHC State of the 5 % test spine (0.46 M cells) converges to
   ``tol = 1e-4`` in 38 iterations (benchmarks/README.md); below the State, where every child has
   its own coarse rows, the dual's Newton steps go to preconditioned conjugate gradients with a
   coarse correction across the children (:mod:`~auditlib.simulate.sparse_coarse`). Same one-pass
   objective and the same constraints; the multipass ordering is still not reproduced. Below the
   State the problem separates by parent, and the DAS solves it so: one problem per parent geounit
   and its children (``nodes/manipulate_nodes.py``, ``geoimp_wrapper``, mapped over the (parent,
   children) pairs by ``engine/topdown_engine.py``'s Spark job). Here a level is released in
   chunks of whole parents of about :data:`CHUNK_VARIABLES` candidate variables — measured, fitted
   and rounded chunk after chunk, the level's noise drawn from its generator in chunk order — so
   memory holds one chunk's problem (a large state's Block level has 10⁸ candidate variables); each
   chunk's fit runs in parts of about :data:`~auditlib.simulate.sparse_parts.PART_VARIABLES`
   variables, one route each.
3. **Rounding** (``optimization/l1_plb_optimizer.py``, multipass ``rounder_query_ordering``: L1 toward
   the real-valued answers of e.g. total, hhgq, hhgq × hispanic, …, detailed, each pass constraining
   the next; :mod:`auditlib.simulate.sparse_rounding`): at the state, the people per unit type
   first (largest remainder to the total), then the cells within each type; below, controlled
   rounding (:func:`~auditlib.simulate.rounding.round_controlled`) with the children's unit-type
   groups as rows — every detailed cell and every child's people of each unit type within one of
   the fitted values, children summing to the parent exactly in every cell, so a fitted
   ``T ≥ lower`` rounds to at least ``lower``: the ordering hhgq → detailed of the DAS's rounder,
   without the other intermediate queries (a child's total is within one per unit type it holds,
   not within one). Should floating point leave a bound short, single people move from a sibling in
   the same parent cell (:func:`~auditlib.simulate.sparse_rounding.fix_lower`).
4. **Invariants and constraints** (``constraints/Constraints_PL94.py``, ``Constraints_DHCP.py``,
   ``querybase_constraints.py``), imposed in the fit and the rounding at every level and counted by
   :func:`~auditlib.geography.sparse_histograms.invariant_violations`: the state total is exact;
   ``hhgq_total_ub`` (nobody in a type without units); ``hhgq_total_lb`` (at least one person per
   facility of each group-quarters type, the DAS's ``hhgq_lb = [0, 1, …, 1]`` times the facilities
   of the unit; at the state the DAS's bound is the total for a lone type, which the total and the
   upper bound imply); PL94's ``nurse_nva_0`` (no one under 18 in nursing facilities) and the DHC's
   33 relgq × age structural zeros (``relgq0_lt15`` … ``relgq40_lt16_gt75``,
   :data:`~auditlib.geography.census_levels.DHCP_AGE_STRUCTURAL_ZEROS`) as cells no fit may use.
   Feasibility: the DAS relies on the invariants being true of the data; here the state's bounds
   are checked (facilities ≤ total), and a parent's rounded histogram meets its own bound, which is
   the sum of its children's, so every child problem is feasible. The PL94 production configuration
   (``configs/production/pl94/person_default.ini``: ``theConstraints.Block = hhgq_total_lb,
   hhgq_total_ub, nurse_nva_0``; ``person_US.ini`` lists only the two bounds at the State) is
   followed, with ``nurse_nva_0`` at the State too (the blocks' zero, children summing to parents,
   implies it there). Not imposed: PL94's ``hhgq_va_*`` (not in that list) and the DHC's household
   constraints (``householder_ub``, ``spousesUnmarriedPartners_ub``, ``people100Plus_ub``,
   ``parents_ub``, ``parentInLaws_ub``: bounds by the housing units, not modelled).
5. **Levels**: one state's run starts at State; the DAS's US run starts at the nation (the US
   level's measurements and the national histogram's split into states are not simulated). A DHC
   run has the DAS's seven levels below the nation: the spine's Prims and Tract_Subset_Groups
   are drawn (:mod:`auditlib.geography.spine_prims`, each group at most ``int(√n + 13)`` of a
   Prim's ``n`` tracts, the DAS's rule), its Tract_Subsets are the spine's tracts. They bound the
   fan-out below a county as in the DAS: over the five base levels a county's tracts are one
   problem (S28's largest county: 401 tracts, 10.7 M variables; S41's 4,391 tracts ≈ 290 M,
   beyond one worker), over the seven S41's county is 9.1 M variables at County → Prim and
   ≤ 0.4 M below (benchmarks/README.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError
from auditlib.geography.sparse_histograms import (
    GQInvariants,
    SparseHistograms,
    cell_type,
    from_keys,
    may_hold,
    unit_types,
)
from auditlib.simulate.sparse_fit import Term, _Fit
from auditlib.simulate.sparse_parts import PartMap
from auditlib.simulate.sparse_progress import Batch, Chunk, Progress, concat, kept_prefix
from auditlib.simulate.sparse_repair import repair_lower
from auditlib.simulate.sparse_rounding import fix_lower, round_rows, round_state

__all__ = [
    "SPARSE_TOPDOWN_NOISE",
    "SparseTopDownRelease",
    "Term",
    "_Fit",
    "noise_rngs",
    "sparse_topdown",
]

#: keyed stream of sparse TopDown noise: (SPARSE_TOPDOWN_NOISE, state, level, replicate)
SPARSE_TOPDOWN_NOISE = 33
#: below the State a level is measured, fitted and rounded in chunks of whole parents of about this
#: many candidate variables (the level's noise drawn chunk after chunk from its generator), so that
#: memory holds one chunk's problem, not the level's
CHUNK_VARIABLES = 2_000_000

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Measured = Sequence[Sequence[tuple[str, float]]]
#: a chunk's release: sorted keys, counts, the fit's iterations and variables
_Released = tuple[IntArray, IntArray, int, int]


@dataclass(frozen=True)
class SparseTopDownRelease:
    """Per level (top first): true and released sparse histograms, FISTA iterations, the number of
    variables of the fit and the invariants aggregated to the level."""

    levels: tuple[str, ...]
    truth: list[SparseHistograms]
    dp: list[SparseHistograms]
    iterations: list[int]
    variables: list[int] = field(default_factory=list)
    invariants: list[GQInvariants] = field(default_factory=list)

    def answers(self, level: int, query: str) -> tuple[IntArray, IntArray]:
        """(released, true) answers ``(n_units, n_query_cells)`` of a query at ``level``."""
        return self.dp[level].answers(query), self.truth[level].answers(query)


class _Saver:
    """The chunks a run releases, saved through ``progress`` in batches at most one per
    ``progress.every`` seconds of work, every level's pending chunks in level order."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.pending: dict[int, Batch] = {}
        self.last = time.monotonic()

    def resume(
        self, level: int, ranges: list[tuple[int, int]], rng: np.random.Generator
    ) -> list[Chunk]:
        """The level's chunks kept by an earlier run (matching ``ranges``), its generator moved to
        its state after them."""
        if self.progress is None:
            return []
        chunks, state = kept_prefix(self.progress.load(level), ranges)
        if state is not None:
            rng.bit_generator.state = state
        return chunks

    def add(self, level: int, j: int, chunk: Chunk, state: dict[str, Any]) -> None:
        """Keep chunk ``j`` of ``level``; ``state``: the level's generator's after its noise."""
        if self.progress is None:
            return
        if level in self.pending:
            b = self.pending[level]
            self.pending[level] = Batch(level, b.first, [*b.chunks, chunk], state)
        else:
            self.pending[level] = Batch(level, j, [chunk], state)
        if time.monotonic() - self.last >= self.progress.every:
            self.progress.save([self.pending[k] for k in sorted(self.pending)])
            self.pending = {}
            self.last = time.monotonic()


def _child_variables(up: SparseHistograms, parent: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """For every child and every non-zero cell of its parent: (child, cell, parent entry)."""
    per_parent = np.diff(up.indptr)
    k = per_parent[parent]
    child = np.repeat(np.arange(parent.size, dtype=np.int64), k)
    start = np.repeat(up.indptr[parent], k)
    offset = np.arange(child.size, dtype=np.int64) - np.repeat(np.cumsum(k) - k, k)
    entry = start + offset
    return child, up.cells[entry].astype(np.int64), entry


def sparse_topdown(
    parents: Sequence[IntArray],
    levels: Sequence[str],
    blocks: SparseHistograms,
    invariants: GQInvariants,
    measured: Measured,
    rngs: Sequence[np.random.Generator],
    *,
    max_iter: int = 20_000,
    tol: float | Sequence[float] = 1e-4,
    on_level: Callable[[int, str], None] | None = None,
    max_outer: int = 40,
    progress: Progress | None = None,
    chunk_variables: int | None = None,
    pool: PartMap | None = None,
    released: int | None = None,
) -> SparseTopDownRelease:
    """One TopDown release of a state (module docstring): ``levels`` top first (one top unit),
    ``parents[i]`` the parent (at ``levels[i]``) of every unit of ``levels[i + 1]`` (children
    grouped by parent), ``blocks`` the bottom level's true histograms, ``measured[i]`` the
    ``(query, σ²)`` of level ``i`` (schema names), ``rngs[i]`` its noise; ``on_level(i, name)`` is
    called after each level is released (e.g. to time it); ``max_outer`` bounds the augmented
    Lagrangian's rounds for the lower bounds (the repair after the fit holds them in any case);
    ``tol`` is the fit's stopping step, one for all levels or one per level; ``progress`` keeps
    the chunks (of about ``chunk_variables`` candidate variables, default
    :data:`CHUNK_VARIABLES` as it is when called) as they finish and resumes after those kept
    (:mod:`auditlib.simulate.sparse_progress`); ``pool`` solves the fits' parts (e.g. in other
    processes: the same release, :mod:`auditlib.simulate.sparse_parts`). ``released``: only the
    first this many levels are released (default all; ``measured`` and ``rngs`` have as many),
    each exactly as in the whole release, since a level's release depends only on the levels
    above it and its own truth (the blocks' sums)."""
    n_levels = len(levels)
    n_out = n_levels if released is None else int(released)
    if not (1 <= n_out <= n_levels and len(parents) == n_levels - 1):
        raise InvalidParameterError(
            f"Invalid sparse TopDown: {n_levels} levels need {n_levels - 1} parent arrays, and "
            f"1 to {n_levels} released; got {len(parents)} and {released!r}"
        )
    if not len(measured) == len(rngs) == n_out:
        raise InvalidParameterError(
            f"Invalid sparse TopDown: {n_out} released levels need {n_out} measured levels and "
            f"generators; got {len(measured)}, {len(rngs)}"
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
    tols = [float(tol)] * n_levels if isinstance(tol, int | float) else [float(t) for t in tol]
    if len(tols) != n_levels:
        raise InvalidParameterError(
            f"Invalid tol: {len(tols)} values for {n_levels} levels; give one or one per level"
        )
    # truth and invariants of every level, bottom up
    truth = [blocks]
    invs = [invariants]
    for p in reversed(parents):
        n_up = int(p.max()) + 1 if p.size else 1
        truth.insert(0, truth[0].aggregate(p, n_up))
        invs.insert(0, invs[0].aggregate(p, n_up))
    if truth[0].n_units != 1:
        raise InvalidParameterError("Invalid hierarchy: the top level must have one unit")
    _check_feasible(invs[0])
    name = blocks.schema_name
    dp: list[SparseHistograms] = []
    iterations: list[int] = []
    variables: list[int] = []
    saver = _Saver(progress)
    chunk = CHUNK_VARIABLES if chunk_variables is None else int(chunk_variables)
    for i in range(n_out):
        level = _Level(
            truth[i], invs[i].units, invs[i].lower(), int(invs[i].state_total), measured[i],
            rngs[i], max_iter, tols[i], max_outer, pool,
        )  # fmt: skip
        # whole parents at a time below the State: the children's variables, noise, fit and
        # rounding of one chunk are held at once (a large state's Block level: 10⁸ variables)
        ranges = [(0, 1)] if i == 0 else _chunks(dp[i - 1], parents[i - 1], chunk)
        done = saver.resume(i, ranges, rngs[i])
        # with a pool, chunk j + 1 is measured and its parts given to the pool before chunk j is
        # rounded: the generator's state after each chunk's noise is kept for its resume point
        waiting: list[tuple[int, Callable[[], _Released], dict[str, Any]]] = []
        for j in range(len(done), len(ranges)):
            if pool is None or i == 0:
                got = (
                    _state_level(level)
                    if i == 0
                    else _child_level(level, dp[i - 1], parents[i - 1], *ranges[j])
                )
                done.append(_chunk(ranges[j], got))
                saver.add(i, j, done[-1], dict(rngs[i].bit_generator.state))
                continue
            finish = _child_start(level, dp[i - 1], parents[i - 1], *ranges[j])
            waiting.append((j, finish, dict(rngs[i].bit_generator.state)))
            if len(waiting) > 1:
                k, fin, state = waiting.pop(0)
                done.append(_chunk(ranges[k], fin()))
                saver.add(i, k, done[-1], state)
        for k, fin, state in waiting:
            done.append(_chunk(ranges[k], fin()))
            saver.add(i, k, done[-1], state)
        keys, y = concat(done)
        dp.append(from_keys(name, keys, y, truth[i].n_units))
        iterations.append(max((c.iterations for c in done), default=0))
        variables.append(sum(c.variables for c in done))
        if on_level is not None:
            on_level(i, levels[i])
    kept = slice(0, n_out)
    return SparseTopDownRelease(
        tuple(levels[kept]), truth[kept], dp, iterations, variables, invs[kept]
    )


@dataclass(frozen=True)
class _Level:
    """One level's inputs: its true histograms, its units' housing units / facilities per unit
    type and their lower bounds, the state total, the ``(query, σ²)`` measured, the noise's
    generator and the fit's settings."""

    truth: SparseHistograms
    units: npt.NDArray[np.int32]
    lower: IntArray
    state_total: int
    measured: Sequence[tuple[str, float]]
    rng: np.random.Generator
    max_iter: int
    tol: float
    max_outer: int
    pool: PartMap | None = None

    def solve(self, fit: _Fit, truth: SparseHistograms) -> tuple[FloatArray, int]:
        """The fit on noisy measurements of ``truth`` (the fit's units' histograms)."""
        return self.start(fit, truth)()

    def start(self, fit: _Fit, truth: SparseHistograms) -> Callable[[], tuple[FloatArray, int]]:
        """:meth:`solve` begun: the noise drawn now, the fit's parts given to the level's ``pool``
        if any; what returns the fit."""
        terms = fit.measure(truth, self.measured, self.rng)
        return fit.start(
            terms, max_iter=self.max_iter, tol=self.tol, max_outer=self.max_outer, pool=self.pool
        )


def _state_level(level: _Level) -> tuple[IntArray, IntArray, int, int]:
    """The state's release: sorted keys ``cell`` and counts of its non-zero cells, the fit's
    iterations and variables (one segment: the state total invariant; groups: its unit types)."""
    name = level.truth.schema_name
    n_types = len(unit_types(name)[3])
    cell = np.arange(level.truth.schema.n_cells, dtype=np.int64)
    cell = cell[may_hold(cell, np.zeros_like(cell), level.units, name)]
    unit = np.zeros(cell.size, dtype=np.int64)
    segment = np.zeros(cell.size, dtype=np.int64)
    group = cell_type(cell, name).astype(np.int64)
    lower = level.lower[0].astype(np.float64)
    g_type = np.arange(n_types, dtype=np.int64)
    fit = _Fit(unit, cell, segment, np.array([float(level.state_total)]), group, lower, g_type)
    x, its = level.solve(fit, level.truth)
    pair = np.zeros(n_types, dtype=np.int64)
    x = repair_lower(x, segment, group, lower, pair, columns=False)
    y = round_state(x, group, level.state_total)
    y = fix_lower(y, x, segment, group, level.lower[0], pair, columns=False)
    nz = y > 0
    return cell[nz], y[nz], its, int(cell.size)


def _chunks(up: SparseHistograms, parent: IntArray, size: int) -> list[tuple[int, int]]:
    """Ranges ``[c0, c1)`` of children of whole parents (``parent`` sorted), each of about ``size``
    candidate variables (children × their parent's non-zero cells) or one parent."""
    if not parent.size:
        return []
    per_parent = np.diff(up.indptr)
    ends = np.append(np.flatnonzero(np.diff(parent)) + 1, parent.size)  # each parent's last + 1
    before = np.cumsum(per_parent[parent])[ends - 1] - per_parent[parent[ends - 1]] * np.diff(
        np.append(0, ends)
    )  # candidate variables before each parent's children
    cut = np.flatnonzero(np.diff(before // max(int(size), 1)) > 0) + 1
    starts = np.append(0, ends[cut - 1])
    return list(zip(starts.tolist(), np.append(starts[1:], parent.size).tolist(), strict=True))


def _units(hist: SparseHistograms, u0: int, u1: int) -> SparseHistograms:
    """The histograms of units ``[u0, u1)`` (renumbered from 0)."""
    a, b = int(hist.indptr[u0]), int(hist.indptr[u1])
    return SparseHistograms(
        hist.schema_name, hist.indptr[u0 : u1 + 1] - a, hist.cells[a:b], hist.counts[a:b]
    )


def _child_level(
    level: _Level, up: SparseHistograms, parents: IntArray, c0: int, c1: int
) -> _Released:
    """The release of the children ``[c0, c1)`` (whole parents) of the released level ``up``: sorted
    keys ``child · n_cells + cell`` and counts of their non-zero cells, the fit's iterations and
    its variables (segments: the parents' cells; groups: each child's unit types)."""
    return _child_start(level, up, parents, c0, c1)()


def _child_start(
    level: _Level, up: SparseHistograms, parents: IntArray, c0: int, c1: int
) -> Callable[[], _Released]:
    """:func:`_child_level` begun: the chunk's variables and noise drawn now, its fit's parts given
    to the level's pool if any; what returns its release (the fit collected, repaired, rounded)."""
    name = up.schema_name
    n_types = len(unit_types(name)[3])
    parent = parents[c0:c1]
    unit, cell, entry = _child_variables(up, parent)  # unit: 0 .. c1 − c0 − 1
    keep = may_hold(cell, unit + c0, level.units, name)
    unit, cell, entry = unit[keep], cell[keep], entry[keep]
    e0, e1 = int(up.indptr[parent[0]]), int(up.indptr[parent[-1] + 1])
    segment = entry - e0
    # groups: (child, unit type), sorted as the variables (child, then cell)
    used, group = np.unique(unit * n_types + cell_type(cell, name), return_inverse=True)
    group = group.astype(np.int64)
    g_unit, g_type = used // n_types, used % n_types
    lower = level.lower[c0 + g_unit, g_type]
    _, pair = np.unique(parent[g_unit] * n_types + g_type, return_inverse=True)
    fit = _Fit(
        unit, cell, segment, up.counts[e0:e1].astype(np.float64), group,
        lower.astype(np.float64), g_type, parent[unit],
    )  # fmt: skip
    fitted = level.start(fit, _units(level.truth, c0, c1))

    def finish() -> _Released:
        x, its = fitted()
        x = repair_lower(x, segment, group, lower.astype(np.float64), pair, columns=True)
        y = round_rows(x, group, parent[g_unit], entry, up)
        y = fix_lower(y, x, segment, group, lower, pair, columns=True)
        nz = y > 0
        keys = (unit[nz] + c0) * up.schema.n_cells + cell[nz]
        order = np.argsort(keys, kind="stable")
        return keys[order], y[nz][order], its, int(unit.size)

    return finish


def _chunk(span: tuple[int, int], got: _Released) -> Chunk:
    keys, counts, its, n_var = got
    return Chunk(span[0], span[1], keys, counts, its, n_var)


def _check_feasible(state: GQInvariants) -> None:
    """The state's bounds admit a histogram: the facilities' minimum people fit in the total, and
    people beyond them have a unit type with units. (Each child's problem is then feasible: its
    parent's rounded histogram meets the parent's bound, the sum of its children's.)"""
    lower = int(state.lower().sum())
    total = int(state.state_total)
    if lower > total or (total > lower and not (state.units > 0).any()):
        raise InvalidParameterError(
            f"Infeasible invariants: the state total {total} must be at least the "
            f"{lower} people the group-quarters facilities need (one each), and people beyond "
            "them need housing units or facilities; give invariants true of a population"
        )


def noise_rngs(
    seed: int, state: int, n_levels: int, replicate: int = 0
) -> list[np.random.Generator]:
    """One keyed generator per level: ``(SPARSE_TOPDOWN_NOISE, state, level, replicate)``."""
    return [
        seeds.rng(seed, SPARSE_TOPDOWN_NOISE, int(state), i, int(replicate))
        for i in range(n_levels)
    ]
