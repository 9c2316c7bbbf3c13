"""Sparse per-unit histograms (CSR): only the non-zero cells of each geounit are stored.

A block of the DHC's 1,227,744-cell histogram holds a few dozen people, so a dense row is > 99.99 %
zeros. :class:`SparseHistograms` keeps, per unit ``u``, the cells ``cells[indptr[u]:indptr[u+1]]``
(sorted, distinct) and their counts (> 0). Queries are answered by cell index
(:meth:`~auditlib.geography.schema.AttributeSchema.cells_query_index`), units are summed into their
parents without densifying, and :class:`GQInvariants` holds what the DAS keeps exact at blocks: the
number of housing units and of group-quarters facilities of each type (its ``gqhh_vect``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.geography import census_levels as census
from auditlib.geography.schema import AttributeSchema, schema

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class SparseHistograms:
    """Histograms of ``n_units`` geounits over ``schema``'s detailed cells, in CSR form."""

    schema_name: str
    indptr: IntArray  # (n_units + 1,), int64
    cells: npt.NDArray[np.int32]  # (nnz,), sorted and distinct within each unit
    counts: npt.NDArray[np.int32]  # (nnz,), > 0

    def __post_init__(self) -> None:
        sch = schema(self.schema_name)
        ip = np.asarray(self.indptr)
        if ip.ndim != 1 or ip.size < 1 or ip[0] != 0 or (np.diff(ip) < 0).any():
            raise InvalidParameterError(
                f"Invalid indptr of shape {ip.shape}: give n_units + 1 non-decreasing offsets from 0"
            )
        if self.cells.shape != (int(ip[-1]),) or self.counts.shape != self.cells.shape:
            raise InvalidParameterError(
                f"Invalid sparse histograms: {self.cells.shape} cells and {self.counts.shape} counts "
                f"for indptr ending at {int(ip[-1])}; give one cell and one count per entry"
            )
        if self.cells.size and (self.cells.min() < 0 or self.cells.max() >= sch.n_cells):
            raise InvalidParameterError(
                f"Invalid cells: outside 0..{sch.n_cells - 1} of schema {sch.name!r}"
            )
        if self.counts.size and self.counts.min() <= 0:
            raise InvalidParameterError("Invalid counts: a stored cell must hold > 0 people")

    @property
    def schema(self) -> AttributeSchema:
        return schema(self.schema_name)

    @property
    def n_units(self) -> int:
        return int(self.indptr.size - 1)

    @property
    def nnz(self) -> int:
        return int(self.cells.size)

    @property
    def nbytes(self) -> int:
        return int(self.indptr.nbytes + self.cells.nbytes + self.counts.nbytes)

    def unit_of_entry(self) -> IntArray:
        """The unit of every stored entry (``(nnz,)``)."""
        return np.repeat(np.arange(self.n_units, dtype=np.int64), np.diff(self.indptr))

    def totals(self) -> IntArray:
        """People per unit."""
        out = np.zeros(self.n_units, dtype=np.int64)
        np.add.at(out, self.unit_of_entry(), self.counts.astype(np.int64))
        return out

    def answers(self, query: str) -> IntArray:
        """Dense ``(n_units, n_query_cells)`` answers of a query (keep it to small queries)."""
        sch = self.schema
        k = sch.n_query_cells(query)
        out = np.zeros(self.n_units * k, dtype=np.int64)
        rows = sch.cells_query_index(query, self.cells)
        np.add.at(out, self.unit_of_entry() * k + rows, self.counts.astype(np.int64))
        return out.reshape(self.n_units, k)

    def dense(self) -> IntArray:
        """Dense ``(n_units, n_cells)`` histograms (tests and small schemas only)."""
        return self.answers("detailed")

    def aggregate(self, parent: npt.ArrayLike, n_parents: int | None = None) -> SparseHistograms:
        """Histograms of the parents: unit ``u``'s cells added to unit ``parent[u]``'s."""
        par = np.asarray(parent, dtype=np.int64)
        if par.shape != (self.n_units,) or (par.size and par.min() < 0):
            raise InvalidParameterError(
                f"Invalid parent of shape {par.shape}: give one parent index >= 0 per unit"
            )
        n = int(n_parents if n_parents is not None else (par.max() + 1 if par.size else 0))
        key = par[self.unit_of_entry()] * self.schema.n_cells + self.cells.astype(np.int64)
        uniq, inverse = np.unique(key, return_inverse=True)
        counts = np.zeros(uniq.size, dtype=np.int64)
        np.add.at(counts, inverse, self.counts.astype(np.int64))
        return from_keys(self.schema_name, uniq, counts, n)


def from_keys(schema_name: str, keys: IntArray, counts: IntArray, n_units: int) -> SparseHistograms:
    """CSR histograms from sorted distinct keys ``unit · n_cells + cell`` and their counts."""
    n_cells = schema(schema_name).n_cells
    unit = keys // n_cells
    indptr = np.searchsorted(unit, np.arange(n_units + 1, dtype=np.int64)).astype(np.int64)
    return SparseHistograms(
        schema_name,
        indptr,
        (keys % n_cells).astype(np.int32),
        np.asarray(counts).astype(np.int32),
    )


def unit_types(schema_name: str) -> tuple[str, int, npt.NDArray[np.int64], tuple[str, ...]]:
    """How a production schema's cells fall into the DAS's unit types (``gqhh_vect``): the attribute,
    its index, the unit type of each of its levels, and the type names (``"household"`` first).

    ``pl94_production``: the 8 hhgq levels. ``dhc_production``: household (relgq 0–17) and the 24
    group-quarters types (relgq 18–41)."""
    if schema_name == "pl94_production":
        return "hhgq", 0, np.arange(8, dtype=np.int64), census.HHGQ_LEVELS
    if schema_name == "dhc_production":
        first = census.RELGQ_FIRST_GQ
        m = np.maximum(np.arange(42, dtype=np.int64) - (first - 1), 0)
        return "relgq", 0, m, ("household", *census.RELGQ_LEVELS[first:])
    raise InvalidParameterError(
        f"Invalid schema {schema_name!r} for group-quarters invariants; choose "
        "'pl94_production' or 'dhc_production'"
    )


@dataclass(frozen=True)
class GQInvariants:
    """What the DAS holds exact at every block: housing units (``units[:, 0]``) and group-quarters
    facilities of each type (``units[:, t]``, t ≥ 1, types of :func:`unit_types`); and the state's
    total population (exact in the production runs)."""

    schema_name: str
    units: npt.NDArray[np.int32]  # (n_blocks, n_types)
    state_total: int

    def aggregate(self, parent: npt.ArrayLike, n_parents: int) -> GQInvariants:
        """The invariants of the parents (units summed; the same state total)."""
        par = np.asarray(parent, dtype=np.int64)
        out = np.zeros((n_parents, self.units.shape[1]), dtype=np.int64)
        np.add.at(out, par, self.units.astype(np.int64))
        return GQInvariants(self.schema_name, out.astype(np.int32), self.state_total)

    def lower(self) -> IntArray:
        """The DAS's ``hhgq_total_lb`` per unit and type, ``(n_units, n_types)``: the number of
        facilities of each group-quarters type (``hhgq_lb`` = 1 person per facility) and 0 for
        households (``hhgq_lb[0] = 0``: housing units may be vacant). At the state, where the total
        is invariant, the DAS's bound is the total for a type that is the only one with units, which
        the total and ``hhgq_total_ub`` imply."""
        out = self.units.astype(np.int64)
        out[:, 0] = 0
        return out


def people_per_unit_type(hist: SparseHistograms) -> IntArray:
    """People per block and unit type, ``(n_blocks, n_types)``."""
    _, axis, level_type, names = unit_types(hist.schema_name)
    sch = hist.schema
    stride = int(np.prod(sch.shape[axis + 1 :], dtype=np.int64))
    level = (hist.cells.astype(np.int64) // stride) % sch.shape[axis]
    k = len(names)
    out = np.zeros(hist.n_units * k, dtype=np.int64)
    np.add.at(out, hist.unit_of_entry() * k + level_type[level], hist.counts.astype(np.int64))
    return out.reshape(hist.n_units, k)


def cell_type(cells: npt.NDArray[np.int64], schema_name: str) -> npt.NDArray[np.int64]:
    """The unit type (:func:`unit_types`) of each cell."""
    _, axis, level_type, _ = unit_types(schema_name)
    sch = schema(schema_name)
    stride = int(np.prod(sch.shape[axis + 1 :], dtype=np.int64))
    return level_type[(cells // stride) % sch.shape[axis]]


def may_hold(
    cells: npt.NDArray[np.int64],
    unit: npt.NDArray[np.int64],
    units: npt.NDArray[np.int32],
    schema_name: str,
    *,
    zeros: bool = True,
) -> npt.NDArray[np.bool_]:
    """Whether ``unit`` may hold people in each cell: it has housing units / facilities of the
    cell's unit type (``hhgq_total_ub``) and, with ``zeros``, the cell is no structural zero."""
    ok = units[unit, cell_type(cells, schema_name)] > 0
    if zeros:
        ok &= ~structural_zero(schema_name, cells)
    return ok


def structural_zero(schema_name: str, cells: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Whether each cell is a structural zero of the production run: PL94's ``nurse_nva_0`` (no one
    under 18 in nursing facilities); the DHC's relgq × age zeros
    (:data:`~auditlib.geography.census_levels.DHCP_AGE_STRUCTURAL_ZEROS`)."""
    c = np.asarray(cells, dtype=np.int64)
    sch = schema(schema_name)
    if schema_name == "pl94_production":
        hhgq, votingage = c // (sch.n_cells // 8), (c // 126) % 2
        return (hhgq == census.PL94_NURSING_HHGQ) & (votingage == 0)
    if schema_name == "dhc_production":
        relgq, age = c // (sch.n_cells // 42), (c // 126) % 116
        lo, hi = np.array(census.RELGQ_AGE_RANGE, dtype=np.int64).T
        return (age < lo[relgq]) | (age > hi[relgq])
    unit_types(schema_name)  # raises the error naming the schemas
    raise AssertionError  # pragma: no cover


def invariant_violations(hist: SparseHistograms, inv: GQInvariants) -> dict[str, int]:
    """How many units break each production constraint (all 0 for a valid database); the units of
    any level, with the invariants aggregated to it (:meth:`GQInvariants.aggregate`).

    * ``state_total``: the people differ from the invariant state total.
    * ``gq_lower``: a type with facilities holds fewer people than facilities (the DAS's
      ``hhgq_total_lb``: one person per facility at least).
    * ``gq_upper``: a type without units or facilities holds people (``hhgq_total_ub`` with no unit).
    * ``structural_zeros``: people in a structural-zero cell (:func:`structural_zero`).
    * ``nursing_minors``: people under 18 in nursing facilities (``nurse_nva_0``; PL94 only).
    """
    if inv.schema_name != hist.schema_name or inv.units.shape[0] != hist.n_units:
        raise InvalidParameterError(
            f"Invalid invariants: schema {inv.schema_name!r} with {inv.units.shape[0]} blocks for "
            f"histograms of {hist.schema_name!r} with {hist.n_units}; give the matching ones"
        )
    people = people_per_unit_type(hist)
    units = inv.units.astype(np.int64)
    gq = np.arange(units.shape[1]) >= 1
    out = {
        "state_total": int(people.sum() != inv.state_total),
        "gq_lower": int(((people < units) & gq).any(axis=1).sum()),
        "gq_upper": int(((units == 0) & (people > 0)).any(axis=1).sum()),
        "structural_zeros": int(
            np.unique(hist.unit_of_entry()[structural_zero(hist.schema_name, hist.cells)]).size
        ),
    }
    if hist.schema_name == "pl94_production":
        out["nursing_minors"] = int((_pl94_nursing_minors(hist) > 0).sum())
    return out


def _pl94_nursing_minors(hist: SparseHistograms) -> IntArray:
    a = hist.answers("hhgq * votingage")
    return a[:, 3 * 2 + 0]  # hhgq level 3 (nursing) × votingage level 0 (under 18)
