"""A TopDown-style release of one state: noisy measurements at every level, then top-down
post-processing to non-negative, consistent, integer histograms.

Given the true detailed histogram of every block (n_blocks, n_cells), the hierarchy above the blocks
(State first) and, per level, the measured queries with their discrete Gaussian variances σ²:

1. **Measure**: every query ``Q`` (a 0/1 matrix, query cells × detailed cells) measured at a level
   gets ``N_Z(0, σ²)`` noise on every cell of every geounit of that level.
2. **State**: the state's detailed histogram is the weighted least-squares fit (weights 1/σ²) to its
   measurements over ``{x ≥ 0, Σ x = true state total}`` (the state population is invariant), then
   rounded preserving that total.
3. **Down the hierarchy**: for every parent, its children's histograms are fitted to their
   measurements subject to ``x ≥ 0`` and, in every cell, the children summing to the parent's final
   (integer) histogram; then rounded with the totals controlled
   (:func:`auditlib.simulate.rounding.round_controlled`): every cell and every child's total within
   one of the fitted values, the sums to the parent exact in every cell.

Every released marginal is computed from the final detailed histograms, so marginals are consistent
with each other and across levels. All parents of a level are solved at once
(:mod:`auditlib.simulate.wls`, :mod:`auditlib.simulate.postprocess`). The national level, when there
is one, is the sum of the states (each state is its own run, as state-parallel as the data). What is
simplified relative to the Census Bureau's TopDown is listed in ``docs/simulation.md``. A level's
residuals and the bias of unit totals are computed in :mod:`auditlib.simulate.topdown_residuals`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.mechanisms import DG_SAMPLERS
from auditlib.mechanisms.dg_table import DGSampler
from auditlib.simulate.measured import allocation_measured as allocation_measured
from auditlib.simulate.measured import schema_query as schema_query
from auditlib.simulate.measured import unexpressible_queries as unexpressible_queries
from auditlib.simulate.noise import noise_key, noise_sampler
from auditlib.simulate.postprocess import round_preserving
from auditlib.simulate.release import ResidualBlock, check_block_size
from auditlib.simulate.rounding import round_controlled

# re-exported for flows/audit/blocks.py, flows/audit/groups.py and flows/audit/tasks.py, which import them from here
from auditlib.simulate.topdown_residuals import level_residuals
from auditlib.simulate.wls import query_matrix, solve_wls_children, solve_wls_normal

if TYPE_CHECKING:
    from auditlib.geography.schema import AttributeSchema
    from auditlib.geography.synthetic import PopulationParams, SyntheticHierarchy

#: keyed stream of TopDown noise: (TOPDOWN_NOISE, state, geolevel, replicate)
TOPDOWN_NOISE = 15

IntArray = npt.NDArray[np.int64]
#: per level (top first): the measured (query name, σ²) pairs
Measured = Sequence[Sequence[tuple[str, float]]]

#: the one-cell schema of total counts
TOTAL_QUERIES: dict[str, npt.NDArray[np.float64]] = {"total": np.ones((1, 1))}


@dataclass(frozen=True)
class StateHierarchy:
    """Levels of one TopDown run, top first; ``parents[i]`` maps the units of ``levels[i + 1]`` to
    their parent at ``levels[i]``. The top level has ``n_top`` units (1: one state)."""

    levels: tuple[str, ...]
    parents: tuple[IntArray, ...]
    n_top: int = 1

    def __post_init__(self) -> None:
        if len(self.parents) != len(self.levels) - 1 or not self.levels:
            raise InvalidParameterError(
                f"Inconsistent hierarchy: {len(self.levels)} levels need "
                f"{max(len(self.levels) - 1, 0)} parent arrays, got {len(self.parents)}"
            )
        n_up = self.n_top
        for name, p in zip(self.levels[1:], self.parents, strict=True):
            if p.ndim != 1 or p.size == 0 or p.min() < 0 or p.max() >= n_up:
                raise InvalidParameterError(
                    f"Inconsistent hierarchy: parents of {name!r} must be indices 0..{n_up - 1}"
                )
            missing = np.bincount(p, minlength=n_up) == 0
            if missing.any():
                raise InvalidParameterError(
                    f"Inconsistent hierarchy: unit {int(np.flatnonzero(missing)[0])} above "
                    f"{name!r} has no children; every unit needs at least one"
                )
            n_up = p.size

    @classmethod
    def from_fanouts(cls, levels: Sequence[str], fanouts: Sequence[int]) -> StateHierarchy:
        """A regular hierarchy of one state: ``fanouts[i]`` children per unit of ``levels[i]``."""
        if len(fanouts) != len(levels) - 1 or any(f < 1 for f in fanouts):
            raise InvalidParameterError(
                f"Invalid fanouts {tuple(fanouts)} for levels {tuple(levels)}: one >= 1 per level "
                "below the top"
            )
        parents, n = [], 1
        for f in fanouts:
            parents.append(np.repeat(np.arange(n, dtype=np.int64), f))
            n *= f
        return cls(tuple(levels), tuple(parents))

    def n_units(self, i: int) -> int:
        return self.n_top if i == 0 else int(self.parents[i - 1].size)

    def aggregate(self, block_hist: npt.ArrayLike) -> list[IntArray]:
        """Histograms of every level (top first) from the bottom level's, by exact sums."""
        h = np.asarray(block_hist)
        n_bottom = self.n_units(len(self.levels) - 1)
        if h.ndim != 2 or h.shape[0] != n_bottom:
            raise InvalidParameterError(
                f"Invalid block histograms of shape {h.shape}; expected ({n_bottom}, n_cells)"
            )
        if not np.issubdtype(h.dtype, np.integer) or (h < 0).any():
            raise InvalidParameterError("Invalid block histograms: counts must be integers >= 0")
        out = [h.astype(np.int64)]
        for i in range(len(self.levels) - 1, 0, -1):
            p, n_up = self.parents[i - 1], self.n_units(i - 1)
            if (np.diff(p) >= 0).all():  # children grouped by parent (every parent has one)
                up = np.add.reduceat(out[0], np.searchsorted(p, np.arange(n_up)), axis=0)
            else:
                up = np.stack(
                    [
                        np.bincount(p, weights=out[0][:, k], minlength=n_up)
                        for k in range(h.shape[1])
                    ],
                    axis=1,
                ).astype(np.int64)
            out.insert(0, up)
        return out


def spine_state(
    spine: object, state: int, levels: Sequence[str] | None = None
) -> tuple[StateHierarchy, IntArray]:
    """One state of a :class:`auditlib.geography.Spine` as its own hierarchy, with its block
    populations as a one-cell histogram (n_blocks, 1). ``levels``: State first, Block last, in
    the order of ``PRIM_LEVELS`` (default the spine's ``LEVELS``); e.g. ``PRIM_LEVELS`` puts the
    tracts under their Tract_Subset_Groups, under their Prims, under their counties."""
    from auditlib.geography.spine import LEVELS, Spine

    if not isinstance(spine, Spine):
        raise InvalidParameterError("spine_state needs an auditlib.geography.Spine")
    if not 0 <= state < spine.n_states:
        raise InvalidParameterError(f"Invalid state: {state}; allowed 0..{spine.n_states - 1}")
    chain = LEVELS if levels is None else tuple(levels)
    if chain[0] != "State" or chain[-1] != "Block":
        raise InvalidParameterError(
            f"Invalid levels {chain}: a state's hierarchy runs from State to Block"
        )
    lo, hi = state, state + 1  # range of the state's units at the level above
    parents = []
    for p in spine.parents_over(chain):
        a, b = np.searchsorted(p, [lo, hi])
        parents.append(p[a:b].astype(np.int64) - lo)
        lo, hi = int(a), int(b)
    pops = spine.block_population[lo:hi].astype(np.int64)[:, None]
    return StateHierarchy(chain, tuple(parents)), pops


def synthetic_state(
    hierarchy: SyntheticHierarchy,
    params: PopulationParams,
    state: int = 1,
    schema: AttributeSchema | str = "total",
) -> tuple[StateHierarchy, IntArray]:
    """One state (1-based) of a synthetic hierarchy as its own hierarchy (State down), with its
    bottom-level histograms ``(n_units, n_cells)`` over ``schema`` (a name or a schema) — the
    population an audit of that hierarchy runs TopDown on (same streams)::

        h = SyntheticHierarchy(("State", "County", "Tract", "Block"), (3, 4, 5), n_states=1)
        hierarchy, block_hist = synthetic_state(h, PopulationParams(seed=1), 1, "pl94")
    """
    from auditlib.geography.populations import synthetic_state_population
    from auditlib.geography.schema import schema as schema_by_name
    from auditlib.geography.synthetic import STATE

    sch = schema_by_name(schema) if isinstance(schema, str) else schema
    if isinstance(state, bool) or not isinstance(state, int | np.integer):
        raise InvalidParameterError(f"Invalid state: {state!r}; an integer 1..{hierarchy.n_states}")
    hist = synthetic_state_population(hierarchy, params, int(state), sch)
    levels = (STATE, *hierarchy.below_state)
    return StateHierarchy.from_fanouts(levels, hierarchy.fanouts), hist


@dataclass(frozen=True)
class TopDownRelease:
    levels: tuple[str, ...]
    truth: list[IntArray]  # per level: (n_units, n_cells) true histograms
    dp: list[npt.NDArray[Any]]  # per level: (n_units, n_cells) released (int64; float64 unrounded)
    iterations: list[int]  # per level: solver iterations (0: exact projection)

    def marginal(self, level: int, q: npt.ArrayLike) -> tuple[IntArray, IntArray]:
        """(released, true) marginal (n_units, query cells) of a query matrix at ``level``."""
        m = np.asarray(q, dtype=np.int64)
        return self.dp[level] @ m.T, self.truth[level] @ m.T


def _check_measured(
    hierarchy: StateHierarchy, query_matrices: Mapping[str, npt.ArrayLike], measured: Measured
) -> None:
    if len(measured) != len(hierarchy.levels):
        raise InvalidParameterError(
            f"Invalid measured: {len(measured)} levels given, the hierarchy has "
            f"{len(hierarchy.levels)} ({', '.join(hierarchy.levels)})"
        )
    for name, level in zip(hierarchy.levels, measured, strict=True):
        if not level:
            raise InvalidParameterError(f"Invalid measured: no query measured at {name!r}")
        for q, _ in level:
            if q not in query_matrices:
                raise UnknownNameError(
                    f"Unknown query: {q!r} at {name!r}; the attribute schema has "
                    f"{', '.join(query_matrices)}"
                )


#: rows of units measured (and rounded) at a time: keeps temporaries flat whatever the level's size
CHUNK_ROWS = 1 << 15


def _normal_equations(
    truth: IntArray,
    query_matrices: Mapping[str, npt.ArrayLike],
    level: Sequence[tuple[str, float]],
    g: np.random.Generator,
    mechs: dict[tuple[str, float], Any],
    sampler: DGSampler = "table",
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Measure every query of a level and fold the measurements into the WLS normal equations
    ``H = Σ_q Q_qᵀQ_q/σ_q²``, ``b = Σ_q y_q Q_q/σ_q²`` (no measurement is kept).

    Units are measured :data:`CHUNK_ROWS` rows at a time; a generator's draws for consecutive row
    chunks are its draws for the whole (units × query cells) array in C order, so the noise does not
    depend on the chunk size."""
    n, n_cells = truth.shape
    hess = np.zeros((n_cells, n_cells))
    b = np.zeros((n, n_cells))
    eye = np.eye(n_cells)
    truth_f = truth.astype(np.float64)  # once for every query (exact: counts < 2⁵³)
    for q, sigma2 in level:
        m = query_matrix(query_matrices, q)
        if not (np.isfinite(sigma2) and sigma2 > 0):
            raise InvalidParameterError(f"Invalid sigma2 {sigma2} for query {q!r}; need > 0")
        key = noise_key(sigma2)  # a float: discrete Gaussian; NoiseVariance: the file's noise
        if key not in mechs:
            mechs[key] = noise_sampler(sigma2, sampler)
        mech = mechs[key]
        hess += (m.T @ m) / sigma2
        detailed = m.shape == eye.shape and bool((m == eye).all())
        for lo in range(0, n, CHUNK_ROWS):
            rows = slice(lo, min(lo + CHUNK_ROWS, n))
            t = truth_f[rows]
            y: npt.NDArray[np.float64] = t.copy() if detailed else np.rint(t @ m.T)
            y += mech.rvs(size=y.shape, rng=g)
            y *= 1.0 / sigma2
            b[rows] += y if detailed else y @ m
    return hess, b


#: how a level's real-valued solution is made integer (see :func:`topdown`)
Rounding = Literal["controlled", "independent", "none"]
ROUNDINGS: tuple[str, ...] = ("controlled", "independent", "none")


def _round_children(
    x: npt.NDArray[np.float64], parent: IntArray, up: IntArray, rounding: Rounding
) -> IntArray:
    """Children (rows, grouped by parent) rounded to their parents' final histograms ``up``,
    :data:`CHUNK_ROWS` rows of whole parents at a time (the same result as one call: parents are
    rounded independently): ``"controlled"`` by :func:`~auditlib.simulate.rounding.round_controlled`
    (cells and each child's total within one), ``"independent"`` by :func:`round_preserving` of
    each (parent, cell) on its own."""
    n, n_cells = x.shape
    cells = np.arange(n_cells, dtype=np.int64)

    def one(rows: npt.NDArray[np.float64], par: IntArray, target: IntArray) -> IntArray:
        if rounding == "controlled":
            return round_controlled(rows, par, target)
        seg = par[:, None] * n_cells + cells
        return round_preserving(rows, seg, target.ravel()).reshape(-1, n_cells)

    if n <= CHUNK_ROWS or (np.diff(parent) < 0).any():
        if rounding == "controlled" and (np.diff(parent) < 0).any():
            order = np.argsort(parent, kind="stable")
            out = np.empty((n, n_cells), dtype=np.int64)
            out[order] = one(x[order], parent[order], up)
            return out
        return one(x, parent, up)
    bounds = np.searchsorted(parent, np.arange(up.shape[0] + 1))  # each parent's first row
    out = np.empty((n, n_cells), dtype=np.int64)
    p0 = 0
    while p0 < up.shape[0]:
        p1 = max(int(np.searchsorted(bounds, bounds[p0] + CHUNK_ROWS, side="right")) - 1, p0 + 1)
        r0, r1 = int(bounds[p0]), int(bounds[p1])
        out[r0:r1] = one(x[r0:r1], parent[r0:r1] - p0, up[p0:p1])
        p0 = p1
    return out


def topdown(
    hierarchy: StateHierarchy,
    block_hist: npt.ArrayLike,
    query_matrices: Mapping[str, npt.ArrayLike],
    measured: Measured,
    rngs: Sequence[np.random.Generator],
    *,
    tol: float = 1e-3,
    rounding: Rounding = "controlled",
    sampler: DGSampler = "table",
) -> TopDownRelease:
    """One TopDown-style release; ``rngs[i]`` draws the noise of level ``i`` (top first).

    ``sampler`` draws the discrete Gaussian noise: ``"table"`` (the default,
    :class:`~auditlib.mechanisms.DiscreteGaussianTable`) or ``"reference"``
    (:class:`~auditlib.mechanisms.DiscreteGaussian`); both take one 64-bit word per draw, but map
    it differently, so the same generators give different (equally distributed) noise.

    ``rounding`` makes each level's real-valued solution integer before the level below is fitted
    to it: ``"controlled"`` (the default, as the Bureau's TopDown) keeps every cell and every
    unit's total within one of the real-valued solution; ``"independent"`` rounds each (parent,
    cell) on its own (totals drift by the sum of their cells' errors); ``"none"`` releases the
    real-valued solutions (float histograms; for measuring what rounding costs)."""
    if rounding not in ROUNDINGS:
        raise InvalidParameterError(
            f"Invalid rounding: {rounding!r}; allowed: {', '.join(ROUNDINGS)}"
        )
    if sampler not in DG_SAMPLERS:
        raise InvalidParameterError(
            f"Invalid sampler: {sampler!r}; allowed: {', '.join(DG_SAMPLERS)}"
        )
    _check_measured(hierarchy, query_matrices, measured)
    if len(rngs) != len(hierarchy.levels):
        raise InvalidParameterError(f"Invalid rngs: need one per level ({len(hierarchy.levels)})")
    truth = hierarchy.aggregate(block_hist)
    n_cells = truth[0].shape[1]
    for q in {q for level in measured for q, _ in level}:
        if query_matrix(query_matrices, q).shape[1] != n_cells:
            raise InvalidParameterError(
                f"Invalid query matrix for {q!r}: {query_matrix(query_matrices, q).shape[1]} "
                f"columns, the histograms have {n_cells} cells"
            )
    mechs: dict[tuple[str, float], Any] = {}
    dp: list[npt.NDArray[Any]] = []
    iters: list[int] = []
    for i, (level, g) in enumerate(zip(measured, rngs, strict=True)):
        n = hierarchy.n_units(i)
        hess, b = _normal_equations(truth[i], query_matrices, level, g, mechs, sampler)
        if i == 0:  # invariant: each top unit's total is exact
            seg = np.repeat(np.arange(n, dtype=np.int64), n_cells).reshape(n, n_cells)
            target = truth[0].sum(axis=1)
            sol = solve_wls_normal(hess, b, seg, target, tol=tol)
            if rounding == "none":
                dp.append(sol.x)
            else:  # the unit total is invariant: rounding its cells keeps it
                dp.append(round_preserving(sol.x, seg, target).reshape(n, n_cells))
        else:
            parent = hierarchy.parents[i - 1]
            sol = solve_wls_children(hess, b, parent, dp[i - 1], tol=tol)
            del b
            if rounding == "none":
                dp.append(sol.x)
            else:
                dp.append(_round_children(sol.x, parent, dp[i - 1], rounding))
        iters.append(sol.iterations)
    return TopDownRelease(hierarchy.levels, truth, dp, iters)


def replicates(
    hierarchy: StateHierarchy,
    block_hist: npt.ArrayLike,
    query_matrices: Mapping[str, npt.ArrayLike],
    measured: Measured,
    level_rngs: Callable[[int], Sequence[np.random.Generator]],
    n: int,
    *,
    tol: float = 1e-3,
) -> list[TopDownRelease]:
    """``n`` independent releases; ``level_rngs(r)`` gives replicate r's generators (one per level)."""
    if n < 1:
        raise InvalidParameterError(f"Invalid replicates: {n}; must be >= 1")
    return [
        topdown(hierarchy, block_hist, query_matrices, measured, level_rngs(r), tol=tol)
        for r in range(n)
    ]


def residual_blocks(
    hierarchy: StateHierarchy,
    block_hist: npt.ArrayLike,
    query_matrices: Mapping[str, npt.ArrayLike],
    measured: Measured,
    query_ids: Mapping[str, int],
    level_rngs: Callable[[int], Sequence[np.random.Generator]],
    n_replicates: int,
    *,
    tol: float = 1e-3,
) -> list[ResidualBlock]:
    """Residuals of ``n_replicates`` releases, one block per level (top first), each holding every
    query measured at that level (see :func:`level_residuals`)."""
    for level in measured:
        for q, _ in level:
            if q not in query_ids:
                raise UnknownNameError(f"Unknown query: {q!r}; no index given for it")
    n_cells = int(np.shape(block_hist)[1]) if np.ndim(block_hist) == 2 else 1
    units = sum(hierarchy.n_units(i) for i in range(len(hierarchy.levels)))
    # every run is kept until the blocks are cut: its truth and released histograms, int64
    check_block_size(n_replicates, units * n_cells, 16)
    runs = replicates(
        hierarchy, block_hist, query_matrices, measured, level_rngs, n_replicates, tol=tol
    )
    return [
        level_residuals(
            runs[0].truth[i],
            [run.dp[i] for run in runs],
            query_matrices,
            [q for q, _ in level],
            query_ids,
        )
        for i, level in enumerate(measured)
    ]
