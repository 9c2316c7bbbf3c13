"""Neighbouring databases of block-histogram populations: D′ from D by moving, adding or removing one
person.

A *histogram database* (:class:`HistogramDatabase`) is what TopDown, Flaxman & Petti's SA3/SA4 and Flaxman's
releases of a table run on: the detailed histogram of every block over the cells of an attribute
schema (:mod:`auditlib.geography.schema`) and the hierarchy above the blocks (levels top first, one
parent-index array per level below the top). A person is one unit of one (block, detailed cell):

* **move** — one person of (block b, cell c) now counts in (block b′, cell c′): another block, another
  cell (e.g. a birthday crossing 18), or both (bounded DP, "replace one row");
* **add** — one more person in (block, cell); **remove** — one fewer (unbounded DP).

D′ keeps the hierarchy of D. :class:`HistogramPair` records the change and answers, at every level and
for every marginal query of the schema, which (unit, query cell) counts change by ±1
(:meth:`HistogramPair.count_difference`): in the ``pl94`` schema a person moved from
``18plus/hispanic/white`` to ``18plus/not_hispanic/white`` in the same block changes no ``total`` and no
``votingage`` count, and the ``hispanic`` and ``detailed`` counts by −1/+1.

Constructors: :meth:`HistogramDatabase.from_spine` (one state of the US spine, or all of it),
:meth:`HistogramDatabase.from_synthetic` (one state of the synthetic hierarchy) and
:meth:`HistogramDatabase.from_table` (real counts, :mod:`auditlib.geography.tabular`).
:meth:`HistogramDatabase.state` cuts one top-level unit out as its own database, as TopDown runs
one state at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.geography.attributes import LABEL_SEPARATOR, TOTAL
from auditlib.geography.schema import AttributeSchema
from auditlib.geography.schema import schema as schema_by_name
from auditlib.simulate.topdown import StateHierarchy, synthetic_state

if TYPE_CHECKING:
    from auditlib.geography.spine import Spine
    from auditlib.geography.synthetic import PopulationParams, SyntheticHierarchy
    from auditlib.geography.tabular import TabularPopulation

IntArray = npt.NDArray[np.int64]
ChangeKind = Literal["move", "add", "remove"]
#: a cell given by its index in the detailed histogram or by its label (``"18plus/hispanic/white"``)
CellRef = int | str


@dataclass(frozen=True)
class HistogramDatabase:
    """Block histograms ``(n_blocks, schema.n_cells)`` and the hierarchy above the blocks.

    ``levels`` top first (the last holds the blocks); ``parents[i]`` maps the units of
    ``levels[i + 1]`` to their parent at ``levels[i]``; the top level has ``n_top`` units (1: one
    state)."""

    schema: AttributeSchema
    levels: tuple[str, ...]
    parents: tuple[IntArray, ...]
    histograms: IntArray
    n_top: int = 1

    def __post_init__(self) -> None:
        parents = tuple(np.asarray(p, dtype=np.int64) for p in self.parents)
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "levels", tuple(self.levels))
        h = np.asarray(self.histograms)
        if h.ndim != 2 or h.shape[1] != self.schema.n_cells:
            raise InvalidParameterError(
                f"Invalid histograms of shape {h.shape}; schema {self.schema.name!r} needs "
                f"(n_blocks, {self.schema.n_cells})"
            )
        if h.dtype.kind not in "iu" or (h.size and h.min() < 0):
            raise InvalidParameterError("Invalid histograms: counts must be integers >= 0")
        object.__setattr__(self, "histograms", h.astype(np.int64))
        hier = self.hierarchy  # checks the parents
        if hier.n_units(len(self.levels) - 1) != h.shape[0]:
            raise InvalidParameterError(
                f"Invalid histograms: {h.shape[0]} rows for "
                f"{hier.n_units(len(self.levels) - 1)} blocks of {self.levels[-1]!r}"
            )

    # -- structure ---------------------------------------------------------------------------------
    @property
    def hierarchy(self) -> StateHierarchy:
        """The hierarchy as TopDown takes it."""
        return StateHierarchy(self.levels, self.parents, self.n_top)

    @property
    def n_blocks(self) -> int:
        return int(self.histograms.shape[0])

    def level_index(self, level: str | int) -> int:
        """Index (top = 0) of a level given by name or index."""
        if isinstance(level, str):
            if level not in self.levels:
                raise InvalidParameterError(
                    f"Unknown level {level!r}; the database has {list(self.levels)}"
                )
            return self.levels.index(level)
        if isinstance(level, bool) or not 0 <= int(level) < len(self.levels):
            raise InvalidParameterError(
                f"Invalid level {level!r}; allowed 0..{len(self.levels) - 1} ({list(self.levels)})"
            )
        return int(level)

    def n_units(self, level: str | int) -> int:
        return self.hierarchy.n_units(self.level_index(level))

    def unit_of_block(self, blocks: npt.ArrayLike, level: str | int) -> IntArray:
        """The unit of ``level`` that holds each block."""
        i = self.level_index(level)
        u = np.asarray(blocks, dtype=np.int64)
        for j in range(len(self.levels) - 2, i - 1, -1):
            u = self.parents[j][u]
        return u

    def level_histograms(self) -> list[IntArray]:
        """Histograms of every level (top first), exact sums of the blocks' (computed once)."""
        return self._level_histograms

    @cached_property
    def _level_histograms(self) -> list[IntArray]:
        return self.hierarchy.aggregate(self.histograms)

    def query_counts(self, level: str | int, query: str = "total") -> IntArray:
        """Counts ``(n_units, n_query_cells)`` of a marginal query at ``level``."""
        i = self.level_index(level)
        hist = self.level_histograms()[i]
        return np.asarray(self.schema.answer(hist, query), dtype=np.int64)

    # -- checks ------------------------------------------------------------------------------------
    def check_block(self, block: object) -> int:
        if not _is_index(block, self.n_blocks):
            raise InvalidParameterError(
                f"Unknown block {block!r}; the database has blocks 0..{self.n_blocks - 1} "
                f"(of {self.levels[-1]!r})"
            )
        return int(block)

    def check_cell(self, cell: object) -> int:
        """A detailed cell by index or by label (``"18plus/hispanic/white"``), found by its levels
        (no list of the schema's labels: the DHC's has 1.2 M)."""
        sch = self.schema
        if isinstance(cell, str):
            found = _label_index(sch, cell)
            if found is None:
                few = [cell_label(sch, c) for c in (0, sch.n_cells - 1)]
                names = " / ".join(a.name for a in sch.attributes) or "total"
                raise InvalidParameterError(
                    f"Unknown cell {cell!r} of schema {sch.name!r}; give one level of each of "
                    f"{names} joined by '/', e.g. {few[0]!r} … {few[-1]!r} (or an index "
                    f"0..{sch.n_cells - 1})"
                )
            return found
        if not _is_index(cell, sch.n_cells):
            raise InvalidParameterError(
                f"Unknown cell {cell!r} of schema {sch.name!r}; allowed 0.."
                f"{sch.n_cells - 1} or a label such as {cell_label(sch, sch.n_cells - 1)!r}"
            )
        return int(cell)

    # -- one state ---------------------------------------------------------------------------------
    def state(self, top_unit: int) -> tuple[HistogramDatabase, IntArray]:
        """The top-level unit ``top_unit`` (a state) as its own database (``n_top`` = 1), and the
        index in this database of each of its blocks (its blocks keep their order)."""
        if not _is_index(top_unit, self.n_top):
            raise InvalidParameterError(
                f"Invalid state {top_unit!r}; the top level {self.levels[0]!r} has units "
                f"0..{self.n_top - 1}"
            )
        keep = np.array([int(top_unit)], dtype=np.int64)
        parents = []
        for p in self.parents:
            new_index = np.full(int(p.max(initial=-1)) + 1, -1, dtype=np.int64)
            new_index[keep] = np.arange(keep.size)
            inside = np.flatnonzero(np.isin(p, keep))
            parents.append(new_index[p[inside]])
            keep = inside
        sub = HistogramDatabase(self.schema, self.levels, tuple(parents), self.histograms[keep], 1)
        return sub, keep

    # -- constructors ------------------------------------------------------------------------------
    @classmethod
    def from_spine(
        cls,
        spine: Spine,
        schema: AttributeSchema | str = "total",
        *,
        seed: int = 0,
        state: int | None = None,
    ) -> HistogramDatabase:
        """One state (0-based; ``None``: every state, top level ``State``) of a spine. The ``total``
        schema takes the block populations; another schema draws each state's histograms with
        :func:`~auditlib.geography.populations.spine_state_histograms` (stream of ``seed``). All
        states of the 2020-sized spine over ``pl94`` take 8.1 M × 28 × 8 bytes ≈ 1.8 GB: give
        ``state`` for TopDown, which runs one state at a time anyway."""
        from auditlib.geography.populations import spine_state_histograms
        from auditlib.geography.spine import LEVELS
        from auditlib.simulate.topdown import spine_state

        sch = schema_by_name(schema) if isinstance(schema, str) else schema
        if state is not None:
            hier, pops = spine_state(spine, int(state))  # checks the state
            hist = pops if sch.n_cells == 1 else spine_state_histograms(spine, state, sch, seed)
            return cls(sch, hier.levels, hier.parents, np.asarray(hist), 1)
        if sch.n_cells == 1:
            hist = spine.block_population.astype(np.int64)[:, None]
        else:
            hist = np.concatenate(
                [spine_state_histograms(spine, s, sch, seed) for s in range(spine.n_states)]
            ).astype(np.int64)
        parents = tuple(spine.parents[g].astype(np.int64) for g in LEVELS[1:])
        return cls(sch, LEVELS, parents, hist, spine.n_states)

    @classmethod
    def from_synthetic(
        cls,
        hierarchy: SyntheticHierarchy,
        params: PopulationParams,
        state: int,
        schema: AttributeSchema | str = "total",
    ) -> HistogramDatabase:
        """One state (1-based, as in the synthetic hierarchy) from State down, as
        :func:`~auditlib.simulate.topdown.synthetic_state` builds it (the ``total`` schema takes its
        block populations, another schema
        :func:`~auditlib.geography.populations.synthetic_state_histograms`)."""
        sch = schema_by_name(schema) if isinstance(schema, str) else schema
        if (
            isinstance(state, bool)
            or not isinstance(state, int | np.integer)
            or not 1 <= state <= hierarchy.n_states
        ):
            raise InvalidParameterError(
                f"Invalid state {state!r}; the synthetic hierarchy has states 1..{hierarchy.n_states}"
            )
        h, hist = synthetic_state(hierarchy, params, int(state), sch)
        return cls(sch, h.levels, h.parents, hist, 1)

    @classmethod
    def from_table(cls, table: TabularPopulation) -> HistogramDatabase:
        """A table of real counts: its rows are the blocks, its top level the top units."""
        lv = table.levels
        return cls(
            table.schema,
            lv,
            tuple(table.parents[g] for g in lv[1:]),
            table.histograms,
            table.n_units(lv[0]),
        )


@dataclass(frozen=True)
class HistogramChange:
    """How D′ differs from D: one person left ``source`` (block, cell) and/or joined ``target``."""

    kind: ChangeKind
    source: tuple[int, int] | None
    target: tuple[int, int] | None

    @property
    def blocks(self) -> tuple[int, ...]:
        return tuple(bc[0] for bc in (self.source, self.target) if bc is not None)


@dataclass(frozen=True)
class HistogramPair:
    """Two histogram databases that differ in one person, and the change."""

    d: HistogramDatabase
    d_prime: HistogramDatabase
    change: HistogramChange

    def count_difference(
        self, level: str | int, query: str = "total"
    ) -> dict[tuple[int, int], int]:
        """``count(D′) − count(D)`` of ``query`` at ``level`` as {(unit, query cell): ±1}; empty if
        the person stays in the same (unit, query cell)."""
        db = self.d
        diff: dict[tuple[int, int], int] = {}
        for bc, sign in ((self.change.source, -1), (self.change.target, 1)):
            if bc is None:
                continue
            row = db.schema.cells_query_index(query, np.array([bc[1]], dtype=np.int64))[0]
            key = (int(db.unit_of_block(bc[0], level)), int(row))
            diff[key] = diff.get(key, 0) + sign
        return {k: v for k, v in diff.items() if v}

    def states(self) -> tuple[int, ...]:
        """The top-level units (states) the change touches."""
        return tuple(sorted({int(self.d.unit_of_block(b, 0)) for b in self.change.blocks}))

    def state(self, top_unit: int) -> HistogramPair:
        """The pair cut to one top-level unit. A move between two states is, inside one of them,
        a removal (the state it left) or an addition (the state it joined); a change elsewhere
        leaves D′ = D there (kind ``"move"`` with neither end, no count differs)."""
        sub_d, rows = self.d.state(top_unit)
        sub_p, _ = self.d_prime.state(top_unit)
        where = {int(b): i for i, b in enumerate(rows)}

        def local(bc: tuple[int, int] | None) -> tuple[int, int] | None:
            return None if bc is None or bc[0] not in where else (where[bc[0]], bc[1])

        src, tgt = local(self.change.source), local(self.change.target)
        if src is None and tgt is None:
            raise InvalidParameterError(
                f"Invalid state {top_unit}: the change touches states {list(self.states())} only; "
                "D′ = D elsewhere"
            )
        kind: ChangeKind = "move" if src and tgt else "add" if tgt else "remove"
        return HistogramPair(sub_d, sub_p, HistogramChange(kind, src, tgt))


def _is_index(value: object, n: int) -> TypeGuard[int | np.integer[Any]]:
    """Whether ``value`` is an integer (not a bool) in ``0..n-1``."""
    return (
        not isinstance(value, bool) and isinstance(value, int | np.integer) and 0 <= int(value) < n
    )


def _with(db: HistogramDatabase, hist: IntArray) -> HistogramDatabase:
    return HistogramDatabase(db.schema, db.levels, db.parents, hist, db.n_top)


def cell_label(sch: AttributeSchema, cell: int) -> str:
    """The label of one detailed cell (``"18plus/hispanic/white"``; ``"total"`` without attributes)."""
    if not sch.attributes:
        return TOTAL
    idx = np.unravel_index(int(cell), sch.shape)
    return LABEL_SEPARATOR.join(a.levels[int(i)] for a, i in zip(sch.attributes, idx, strict=True))


def _label_index(sch: AttributeSchema, label: str) -> int | None:
    """The detailed cell of a label, or ``None`` if it names none."""
    if not sch.attributes:
        return 0 if label == TOTAL else None
    parts = label.split(LABEL_SEPARATOR)
    if len(parts) != len(sch.attributes):
        return None
    idx = []
    for a, part in zip(sch.attributes, parts, strict=True):
        if part not in a.levels:
            return None
        idx.append(a.levels.index(part))
    return int(np.ravel_multi_index(tuple(idx), sch.shape))


def structural_zero(sch: AttributeSchema, cell: int) -> str:
    """Why the production constraints hold detailed cell ``cell`` at 0 (the constraint), or ``""``
    if it may hold people: the cells the sparse TopDown's fit never uses
    (:func:`auditlib.geography.sparse_histograms.structural_zero`): ``pl94_production``'s
    ``nurse_nva_0`` (nobody under 18 in a nursing facility), ``dhc_production``'s relgq × age zeros
    (:data:`~auditlib.geography.census_levels.DHCP_AGE_STRUCTURAL_ZEROS`). Other schemas: none.
    The DHC's household constraints (e.g. a householder's age) are not listed."""
    from auditlib.geography import census_levels as census
    from auditlib.geography.sparse_histograms import structural_zero as held_at_zero

    if (
        sch.name not in ("pl94_production", "dhc_production")
        or not held_at_zero(sch.name, [cell])[0]
    ):
        return ""
    if sch.name == "pl94_production":
        return "nurse_nva_0: nobody under 18 in a nursing facility"
    relgq = int(np.unravel_index(int(cell), sch.shape)[0])
    rule, _, lo, hi = next(z for z in census.DHCP_AGE_STRUCTURAL_ZEROS if z[1] == relgq)
    return f"{rule}: relgq {sch.attributes[0].levels[relgq]!r} holds ages {lo}–{hi} only"


def _check_possible(db: HistogramDatabase, cell: int, what: str) -> None:
    """Refuse a person put into a cell the production constraints hold at 0: D′ would not be a
    database the production release takes (its constraints would have no solution)."""
    why = structural_zero(db.schema, cell)
    if why:
        raise InvalidParameterError(
            f"Invalid {what}: cell {cell} ({cell_label(db.schema, cell)!r}) of schema "
            f"{db.schema.name!r} is held at 0 by the production constraints ({why}); choose "
            "another cell (another age, or another household or group-quarters type)"
        )


def _take(db: HistogramDatabase, block: object, cell: object, what: str) -> tuple[int, int]:
    b, c = db.check_block(block), db.check_cell(cell)
    if db.histograms[b, c] < 1:
        sch = db.schema
        full = np.flatnonzero(db.histograms[b])
        if full.size:
            some = ", ".join(f"{cell_label(sch, i)!r} ({db.histograms[b, i]})" for i in full[:4])
            hint = f"non-empty cells of block {b}: {some}{', …' if full.size > 4 else ''}"
        else:
            blocks = np.flatnonzero(db.histograms.sum(axis=1))[:4].tolist()
            hint = f"block {b} is empty; non-empty blocks include {blocks}"
        raise InvalidParameterError(
            f"Invalid {what}: block {b}, cell {c} ({cell_label(sch, c)!r}) is empty in D; nobody "
            "to take "
            f"(choose a non-empty cell; {hint})"
        )
    return b, c


def move_person(
    db: HistogramDatabase,
    from_block: int,
    from_cell: CellRef,
    to_block: int,
    to_cell: CellRef | None = None,
) -> HistogramPair:
    """D′: one person of (``from_block``, ``from_cell``) counts in (``to_block``, ``to_cell``)
    instead (``to_cell`` defaults to ``from_cell``: the same person in another block)."""
    src = _take(db, from_block, from_cell, "move")
    tgt = (db.check_block(to_block), src[1] if to_cell is None else db.check_cell(to_cell))
    _check_possible(db, tgt[1], "move")
    if tgt == src:
        raise InvalidParameterError(
            f"Invalid move: block {src[0]}, cell {src[1]} to itself; choose another block or cell"
        )
    hist = db.histograms.copy()
    hist[src] -= 1
    hist[tgt] += 1
    return HistogramPair(db, _with(db, hist), HistogramChange("move", src, tgt))


def add_person(db: HistogramDatabase, block: int, cell: CellRef) -> HistogramPair:
    """D′: D plus one person in (``block``, ``cell``)."""
    tgt = (db.check_block(block), db.check_cell(cell))
    _check_possible(db, tgt[1], "add")
    hist = db.histograms.copy()
    hist[tgt] += 1
    return HistogramPair(db, _with(db, hist), HistogramChange("add", None, tgt))


def remove_person(db: HistogramDatabase, block: int, cell: CellRef) -> HistogramPair:
    """D′: D without one person of (``block``, ``cell``) (which must not be empty)."""
    src = _take(db, block, cell, "remove")
    hist = db.histograms.copy()
    hist[src] -= 1
    return HistogramPair(db, _with(db, hist), HistogramChange("remove", src, None))


def neighbour(
    db: HistogramDatabase,
    kind: str,
    *,
    block: int,
    cell: CellRef = 0,
    other_block: int | None = None,
    other_cell: CellRef | None = None,
) -> HistogramPair:
    """Any of the three by name: ``"add"``/``"remove"`` at (block, cell); ``"move"`` from
    (``other_block``, ``other_cell``) into (block, cell)."""
    if kind == "add":
        return add_person(db, block, cell)
    if kind == "remove":
        return remove_person(db, block, cell)
    if kind == "move":
        if other_block is None:
            raise InvalidParameterError("Invalid move: give other_block (where the person was)")
        return move_person(db, other_block, cell if other_cell is None else other_cell, block, cell)
    raise InvalidParameterError(f"Invalid kind {kind!r}; allowed: add, remove, move")


def accounting_components(
    pair: HistogramPair, measured: Sequence[Sequence[tuple[str, float]]]
) -> list[tuple[float, int]]:
    """``(σ², count)`` of the discrete Gaussian measurements the change moves by ±1: per level
    (top first) and measured (query, σ²), one component per changed (unit, query cell). Their
    composition (:class:`~auditlib.accounting.DiscreteGaussianComposition`) is the exact loss of
    all the measurements of D vs D′, which any post-processing (TopDown) cannot exceed."""
    if len(measured) != len(pair.d.levels):
        raise InvalidParameterError(
            f"Invalid measured: {len(measured)} levels given, the database has "
            f"{len(pair.d.levels)} ({', '.join(pair.d.levels)})"
        )
    out: dict[float, int] = {}
    for i, level in enumerate(measured):
        for q, sigma2 in level:
            k = len(pair.count_difference(i, q))
            if k:
                out[float(sigma2)] = out.get(float(sigma2), 0) + k
    return sorted(out.items())
