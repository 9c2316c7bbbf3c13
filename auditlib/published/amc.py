"""The Approximate Monte Carlo (AMC) replicates of a published TopDown release.

The Census Bureau publishes its 2020 counts without margins of error. The AMC method (Ashmead,
Hawes, Pritts, Zhuravlev and Keller, "An Approximate Monte Carlo Simulation Method for Estimating
Uncertainty and Constructing Confidence Intervals for 2020 Census Statistics", 2024) runs TopDown
again ``R`` times with the *published* bottom-level histograms ``P`` as its input — ``P`` stands
in for the confidential truth ``T`` — and reads the error of TopDown at ``T`` off its error at
``P``: per count, the bias ``mean(P_r) − P``, the variance of the ``P_r`` and their mean squared
deviation from ``P``, from which :mod:`auditlib.published.intervals` builds intervals of ``T``.
The assumption is that TopDown errs at ``P`` as it errs at ``T``; it fails where the error depends
on the count itself, above all for small counts near zero (non-negativity biases them up, and,
with totals held, their larger siblings down) — ``docs/published_error_bars.md``.

:func:`amc_replicates` streams: each replicate is reduced, level by level, to running sums per
(unit, query cell) (:class:`~auditlib.published.moments.MomentAccumulator`) and then dropped; areas
given up front (blocks into districts) are summed per replicate before their sums are taken.
Only with ``keep_bottom`` are the bottom level's replicate counts kept, for areas defined later
(:func:`~auditlib.published.intervals.area_moments`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.mechanisms.dg_table import DGSampler
from auditlib.published.moments import (
    AreaMap,
    Areas,
    MomentAccumulator,
    Moments,
    area_map,
    check_counts,
)
from auditlib.simulate.release import check_block_size
from auditlib.simulate.topdown import Measured, Rounding, StateHierarchy, topdown
from auditlib.simulate.wls import query_matrix


@dataclass(frozen=True)
class AMCResult:
    """The AMC moments of one published state.

    ``levels[name][query]`` holds the :class:`Moments` of every unit of level ``name`` and every
    cell of ``query`` (rows: units; columns: the query's cells); ``areas[query]`` the same for the
    areas given (rows in the order of ``area_names``); ``bottom[query]`` the bottom level's
    replicate counts ``(R, n_units, cells)`` (int32) when kept."""

    level_names: tuple[str, ...]
    queries: tuple[str, ...]
    n_replicates: int
    levels: dict[str, dict[str, Moments]]
    areas: dict[str, Moments] = field(default_factory=dict)
    area_names: tuple[str, ...] = ()
    bottom: dict[str, npt.NDArray[np.int32]] = field(default_factory=dict)

    def merge(self, other: AMCResult) -> AMCResult:
        """This run's replicates and ``other``'s (another range of replicates of the same
        published release, queries and areas) as one result; kept bottom counts are concatenated
        in that order."""
        if (other.level_names, other.queries, other.area_names) != (
            self.level_names,
            self.queries,
            self.area_names,
        ):
            raise InvalidParameterError(
                "Inconsistent AMC results: merged runs need the same levels, queries and areas"
            )
        if bool(self.bottom) != bool(other.bottom):
            raise InvalidParameterError(
                "Inconsistent AMC results: one run kept its bottom counts and the other did not"
            )
        return AMCResult(
            self.level_names,
            self.queries,
            self.n_replicates + other.n_replicates,
            {
                lv: {q: m.merge(other.levels[lv][q]) for q, m in by_q.items()}
                for lv, by_q in self.levels.items()
            },
            {q: m.merge(other.areas[q]) for q, m in self.areas.items()},
            self.area_names,
            {q: np.concatenate([b, other.bottom[q]]) for q, b in self.bottom.items()},
        )


def replicate_rngs(
    seed: int | np.random.SeedSequence, replicate: int, n_levels: int
) -> list[np.random.Generator]:
    """Replicate ``replicate``'s generators, one per level: ``SeedSequence(entropy,
    spawn_key=(*key, replicate, level))`` of the seed's entropy and spawn key (the same whatever
    was spawned from a ``SeedSequence`` passed in before)."""
    ss = seed if isinstance(seed, np.random.SeedSequence) else None
    if ss is None:
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise InvalidParameterError(
                f"Invalid seed: {seed!r}; need an integer >= 0 or a numpy SeedSequence"
            )
        ss = np.random.SeedSequence(int(seed))
    return [
        np.random.Generator(
            np.random.PCG64(
                np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, int(replicate), level))
            )
        )
        for level in range(n_levels)
    ]


def _query_stack(
    query_matrices: Mapping[str, npt.ArrayLike], queries: Sequence[str], n_cells: int
) -> tuple[npt.NDArray[np.float64], dict[str, slice]]:
    """The queries' 0/1 matrices stacked (query cells × histogram cells), as float64 — marginals
    are BLAS products, exact for counts below 2⁵³ — and each query's rows."""
    mats, slices, lo = [], {}, 0
    for q in queries:
        if q not in query_matrices:
            raise UnknownNameError(
                f"Unknown query: {q!r}; the query matrices have {', '.join(query_matrices)}"
            )
        m = query_matrix(query_matrices, q)
        if m.shape[1] != n_cells:
            raise InvalidParameterError(
                f"Invalid query matrix for {q!r}: {m.shape[1]} columns, the published "
                f"histograms have {n_cells} cells"
            )
        mats.append(m)
        slices[q] = slice(lo, lo + m.shape[0])
        lo += m.shape[0]
    return np.concatenate(mats, axis=0), slices


def amc_replicates(
    hierarchy: StateHierarchy,
    published: npt.ArrayLike,
    query_matrices: Mapping[str, npt.ArrayLike],
    measured: Measured,
    n_replicates: int,
    seed: int | np.random.SeedSequence,
    *,
    queries: Sequence[str] | None = None,
    areas: Areas | AreaMap | None = None,
    keep_bottom: bool = False,
    first_replicate: int = 0,
    tol: float = 1e-3,
    rounding: Rounding = "controlled",
    sampler: DGSampler = "table",
) -> AMCResult:
    """``n_replicates`` TopDown runs (:func:`auditlib.simulate.topdown.topdown`) with the
    published bottom-level histograms ``published`` ``(n_units, n_cells)`` as their truth,
    reduced to the :class:`Moments` of every level's units and of ``areas``' sums, for the cells of
    ``queries`` (default: every query of ``query_matrices``, in its order).

    ``measured`` and ``query_matrices`` are the release's own (the allocation's queries and σ²,
    e.g. :func:`auditlib.simulate.measured.allocation_measured`); ``seed`` gives replicate ``r``
    the generators :func:`replicate_rngs` ``(seed, r, levels)``. ``areas`` maps the bottom-level
    units to areas (:func:`~auditlib.published.moments.area_map`). ``keep_bottom`` keeps the
    bottom level's replicate counts (``R × n_units × query cells`` int32) in
    :attr:`AMCResult.bottom`. ``first_replicate`` runs replicates ``first_replicate ..
    first_replicate + n_replicates − 1`` (each keeps its own generators), so ranges run apart
    (each of at least 2 replicates) and merged (:meth:`AMCResult.merge`) are one run's."""
    if isinstance(n_replicates, bool) or not isinstance(n_replicates, int | np.integer):
        raise InvalidParameterError(f"Invalid n_replicates: {n_replicates!r}; need an integer")
    if n_replicates < 2:
        raise InvalidParameterError(
            f"Invalid n_replicates: {n_replicates}; a variance needs at least 2 replicates "
            "(the Bureau runs 25)"
        )
    if isinstance(first_replicate, bool) or not isinstance(first_replicate, int | np.integer):
        raise InvalidParameterError(f"Invalid first_replicate: {first_replicate!r}; an integer")
    if first_replicate < 0:
        raise InvalidParameterError(f"Invalid first_replicate: {first_replicate}; need >= 0")
    p_bottom = check_counts(published)
    n_levels = len(hierarchy.levels)
    n_bottom = hierarchy.n_units(n_levels - 1)
    if p_bottom.ndim != 2 or p_bottom.shape[0] != n_bottom:
        raise InvalidParameterError(
            f"Invalid published histograms of shape {p_bottom.shape}; the hierarchy's bottom "
            f"level ({hierarchy.levels[-1]!r}) has {n_bottom} units: need ({n_bottom}, n_cells)"
        )
    qnames = tuple(query_matrices) if queries is None else tuple(queries)
    if not qnames:
        raise InvalidParameterError("Invalid queries: none given; name at least one")
    stack, slices = _query_stack(query_matrices, qnames, p_bottom.shape[1])
    amap: AreaMap | None = None if areas is None else area_map(areas, n_bottom)
    if keep_bottom and rounding == "none":
        raise InvalidParameterError(
            "Invalid keep_bottom with rounding 'none': the kept replicates are integer counts; "
            "keep them of a rounded release"
        )
    if keep_bottom:
        check_block_size(n_replicates, n_bottom * stack.shape[0], 4)
    published_levels = hierarchy.aggregate(p_bottom)
    accs = [MomentAccumulator(h.astype(np.float64) @ stack.T) for h in published_levels]
    area_acc = (
        None
        if amap is None
        else MomentAccumulator(amap.sums(p_bottom.astype(np.float64) @ stack.T))
    )
    kept: npt.NDArray[np.int32] | None = (
        np.empty((n_replicates, n_bottom, stack.shape[0]), dtype=np.int32) if keep_bottom else None
    )
    for j in range(int(n_replicates)):
        r = int(first_replicate) + j
        rel = topdown(
            hierarchy,
            p_bottom,
            query_matrices,
            measured,
            replicate_rngs(seed, r, n_levels),
            tol=tol,
            rounding=rounding,
            sampler=sampler,
        )
        for dp, acc in zip(rel.dp, accs, strict=True):
            marginals = np.asarray(dp, dtype=np.float64) @ stack.T
            acc.add(marginals)
        bottom = marginals  # the bottom level's
        if area_acc is not None and amap is not None:
            area_acc.add(amap.sums(bottom))
        if kept is not None:
            kept[j] = bottom
    level_moments = {
        name: {q: acc.moments().columns(s) for q, s in slices.items()}
        for name, acc in zip(hierarchy.levels, accs, strict=True)
    }
    area_out: dict[str, Moments] = {}
    if area_acc is not None:
        am = area_acc.moments()
        area_out = {q: am.columns(s) for q, s in slices.items()}
    bottom_out = {} if kept is None else {q: kept[:, :, s] for q, s in slices.items()}
    return AMCResult(
        level_names=tuple(hierarchy.levels),
        queries=qnames,
        n_replicates=int(n_replicates),
        levels=level_moments,
        areas=area_out,
        area_names=() if amap is None else amap.names,
        bottom=bottom_out,
    )
