"""Attribute schemas: the cells of a population histogram and the marginal queries measured on it.

A schema is a list of categorical attributes; the *detailed histogram* of a geounit counts its people
in every combination of levels, flattened in C order (the last attribute varies fastest), so a schema
with level counts ``(2, 2, 7)`` has 28 cells and cell ``(a, h, r)`` is ``a·14 + h·7 + r``.

A *query* is the marginal over a subset of the attributes, named like the Census Bureau's DAS names its
queries: the attribute names joined by ``" * "`` in schema order (``"votingage * hispanic"``), with two
special names: ``"total"`` (no attribute, one cell) and ``"detailed"`` (all attributes). An attribute
may also be kept through one of its *recodes* (:class:`~auditlib.geography.attributes.Recode`:
groups of its levels, as the DAS's ``recode…`` methods), named in place of the attribute
(``"hhinstlevels"`` groups ``hhgq`` into household / institutional / non-institutional;
``"age_18_64_116 * sex"``). A query's answer is
``query_matrix(q) @ histogram``; every detailed cell lies in exactly one row of every query.

Large schemas (the DHC's 1,227,744 cells) are answered by cell index, never by a dense matrix:
:meth:`AttributeSchema.cells_query_index` maps any array of detailed cell indices (e.g. the non-zero
cells of a sparse histogram) to their query rows, and :meth:`AttributeSchema.answer_sparse` sums
``(cell, count)`` pairs into a query's answers.

Shipped schemas (:func:`schema`):

* ``"total"`` — no attribute; one cell (the population count).
* ``"pl94"`` — PL94-171-like persons: voting age (2) × Hispanic origin (2) × a reduced race (7: the six
  single races of the 2020 Census and "two or more races") = 28 cells. The Bureau's CENRACE has 63
  levels (every non-empty combination of six races) and its detailed histogram adds HHGQ (8); both are
  reduced here.
* ``"pl94_production"`` — the Bureau's PL94-171 persons histogram (``SCHEMA_PL94_2020``): hhgq (8) ×
  votingage (2) × hispanic (2) × cenrace (63) = 2,016 cells, with the ``hhinstlevels`` recode: every
  query of the ``pl94_2021_production`` allocation.
* ``"dhc_production"`` — the DHC persons histogram (``SCHEMA_DHCP``): relgq (42) × sex (2) × age (116) ×
  hispanic (2) × cenrace (63) = 1,227,744 cells, with the relgq and age recodes of the DHC allocations
  (``relgq_4_groups``, ``gq_constr_groups``, ``popSehsdTargetsRelship``, ``relship_and_eight_level_GQ``,
  ``age_18_64_116``, ``age_10_groups``, ``age_38_groups``, ``age_40_groups``). Levels and groups are
  the DAS's (:mod:`auditlib.geography.census_levels`).

Attributes, recodes and the special query names are in :mod:`auditlib.geography.attributes`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography import census_levels as census
from auditlib.geography.attributes import (
    DETAILED,
    LABEL_SEPARATOR,
    TOTAL,
    Attribute,
    Recode,
    _by_name,
    _check_name,
    _check_unique,
    _tuple_of,
)
from auditlib.geography.census_levels import RecodeSpec

#: joins attribute names in a query name, as in the Bureau's DAS (``"votingage * hispanic"``)
QUERY_SEPARATOR = " * "


#: one kept axis of a query: (attribute index, recode name or None for the attribute's own levels)
QueryAxis = tuple[int, str | None]


@dataclass(frozen=True)
class AttributeSchema:
    """Named attributes whose level combinations are the cells of a detailed histogram (C order)."""

    name: str
    attributes: tuple[Attribute, ...]

    def __post_init__(self) -> None:
        _check_name("schema", self.name)
        owner = f"schema {self.name!r}"
        attributes = _tuple_of(
            Attribute, self.attributes, "attribute", owner, "Attribute(name, levels)"
        )
        object.__setattr__(self, "attributes", attributes)
        names = [n for a in attributes for n in (a.name, *a.aliases, *(r.name for r in a.recodes))]
        _check_unique(
            f"schema {self.name!r}: attributes and recodes", "attribute and recode", names
        )

    # -- cells -----------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Level counts of the attributes: the detailed histogram reshaped to one axis per attribute."""
        return tuple(a.n_levels for a in self.attributes)

    @property
    def n_cells(self) -> int:
        """Number of detailed cells: the product of the level counts (1 without attributes)."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def attribute_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def attribute(self, name: str) -> Attribute:
        """The attribute called ``name``."""
        return _by_name(self.attributes, name, f"attribute {name!r} in schema {self.name!r}")

    # -- queries ---------------------------------------------------------------------------------
    @cached_property
    def _queries(self) -> dict[str, tuple[int, ...]]:
        """Query name -> indices of its attributes, every subset once: by size, then schema order."""
        k = len(self.attributes)
        out: dict[str, tuple[int, ...]] = {}
        for size in range(k + 1):
            for subset in combinations(range(k), size):
                if size == 0:
                    name = TOTAL
                elif size == k:
                    name = DETAILED
                else:
                    name = QUERY_SEPARATOR.join(self.attributes[i].name for i in subset)
                out[name] = subset
        return out

    @cached_property
    def _parts(self) -> dict[str, QueryAxis]:
        """Every name a query may join: attribute names and aliases, and recode names."""
        out: dict[str, QueryAxis] = {}
        for i, a in enumerate(self.attributes):
            for n in (a.name, *a.aliases):
                out[n] = (i, None)
            for r in a.recodes:
                out[r.name] = (i, r.name)
        return out

    @cached_property
    def _level_maps(self) -> dict[QueryAxis, npt.NDArray[np.int64]]:
        """(attribute, recode) -> the query row of every level of the attribute."""
        out: dict[QueryAxis, npt.NDArray[np.int64]] = {}
        for i, a in enumerate(self.attributes):
            out[(i, None)] = np.arange(a.n_levels, dtype=np.int64)
            for r in a.recodes:
                out[(i, r.name)] = r.level_map(a.n_levels)
        return out

    @property
    def query_names(self) -> tuple[str, ...]:
        """Every marginal query: ``"total"``, each attribute, each pair, …, ``"detailed"``.

        Without attributes the total is the detailed histogram, and only ``"total"`` is listed
        (``"detailed"`` is still accepted by the methods below). Recode queries
        (:attr:`recode_names`) are accepted by the methods below but not listed.
        """
        return tuple(self._queries)

    @property
    def recode_names(self) -> tuple[str, ...]:
        """Names of the attributes' recodes, which a query may name in place of an attribute."""
        return tuple(r.name for a in self.attributes for r in a.recodes)

    def query_attributes(self, query: str) -> tuple[str, ...]:
        """Names of the attributes a query keeps, in schema order (``()`` for the total).

        Accepts the names in :attr:`query_names` and any ``" * "``-joined set of attribute names
        (or their aliases or recodes), in any order (``"race * votingage"`` is
        ``"votingage * race"``; all attributes is detailed).
        """
        return tuple(self.attributes[i].name for i, _ in self._query_axes(query))

    def _query_axes(self, query: str) -> tuple[QueryAxis, ...]:
        """The axes a query keeps, in schema order."""
        if not isinstance(query, str):
            raise UnknownNameError(
                f"Unknown query {query!r} of schema {self.name!r}; "
                f"choose one of {list(self.query_names)}"
            )
        if query in self._queries:
            return tuple((i, None) for i in self._queries[query])
        if query == DETAILED:  # a schema without attributes
            return ()
        parts = [p.strip() for p in query.split("*")]
        axes = [self._parts.get(p) for p in parts]
        kept = [ax[0] for ax in axes if ax is not None]
        if all(ax is not None for ax in axes) and len(set(kept)) == len(kept):
            return tuple(sorted(ax for ax in axes if ax is not None))
        recodes = f", recodes {list(self.recode_names)}" if self.recode_names else ""
        raise UnknownNameError(
            f"Unknown query {query!r} of schema {self.name!r}; choose one of "
            f"{list(self.query_names)} (or attribute names{recodes} joined by "
            f"{QUERY_SEPARATOR!r}, each attribute at most once)"
        )

    def _query_indices(self, query: str) -> tuple[int, ...]:
        return tuple(i for i, _ in self._query_axes(query))

    def canonical_query(self, query: str) -> str:
        """The schema's name of ``query``: the entry of :attr:`query_names` it names (aliases and any
        attribute order accepted: for ``"pl94"``, ``"cenrace * votingage"`` is ``"votingage * race"``
        and ``"votingage * hispanic * cenrace"`` is ``"detailed"``); a query keeping a recode is its
        parts in schema order (``"hispanic * sex * age_40_groups"`` is ``"sex * age_40_groups *
        hispanic"`` for ``"dhc_production"``)."""
        axes = self._query_axes(query)
        if any(r is not None for _, r in axes):
            return QUERY_SEPARATOR.join(
                r if r is not None else self.attributes[i].name for i, r in axes
            )
        keep = tuple(i for i, _ in axes)
        for name, idx in self._queries.items():
            if idx == keep:
                return name
        return TOTAL  # a schema without attributes: "detailed" is the total

    def has_query(self, query: str) -> bool:
        """Whether :meth:`canonical_query` accepts ``query``."""
        try:
            self._query_axes(query)
        except UnknownNameError:
            return False
        return True

    def query_shape(self, query: str) -> tuple[int, ...]:
        """Row counts of the axes the query keeps (levels, or a recode's groups; ``()`` for total)."""
        return tuple(int(self._level_maps[ax].max()) + 1 for ax in self._query_axes(query))

    def n_query_cells(self, query: str) -> int:
        return int(np.prod(self.query_shape(query), dtype=np.int64))

    def cells_query_index(self, query: str, cells: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """For each detailed cell index in ``cells`` (any shape), the row of ``query`` it falls in.

        Index arithmetic only (memory ∝ ``cells.size``): the way to answer a query on sparse
        histograms of a large schema."""
        c = np.asarray(cells)
        if c.dtype.kind not in "iu" or (c.size and (c.min() < 0 or c.max() >= self.n_cells)):
            raise InvalidParameterError(
                f"Invalid cells for schema {self.name!r}: give integer cell indices in "
                f"0..{self.n_cells - 1}"
            )
        c = c.astype(np.int64)
        axes = self._query_axes(query)
        row = np.zeros(c.shape, dtype=np.int64)
        shape = self.shape
        for i, r in axes:
            stride = int(np.prod(shape[i + 1 :], dtype=np.int64))
            m = self._level_maps[(i, r)]
            row = row * (int(m.max()) + 1) + m[(c // stride) % shape[i]]
        return row

    def cell_query_index(self, query: str) -> npt.NDArray[np.int64]:
        """For every detailed cell, the row of ``query`` it falls in (shape ``(n_cells,)``)."""
        return self.cells_query_index(query, np.arange(self.n_cells, dtype=np.int64))

    #: largest dense query matrix :meth:`query_matrix` builds (entries)
    MAX_DENSE_ENTRIES = 1 << 24

    def query_matrix(self, query: str) -> npt.NDArray[np.int8]:
        """0/1 matrix ``(n_query_cells, n_cells)``: row ``r`` sums the detailed cells of query cell ``r``.

        Query cells are in C order over the kept axes, in schema order. Refused above
        :attr:`MAX_DENSE_ENTRIES` entries (e.g. the DHC's age or detailed queries over 1.2 M cells): use
        :meth:`cells_query_index` there.
        """
        size = self.n_query_cells(query) * self.n_cells
        if size > self.MAX_DENSE_ENTRIES:
            raise InvalidParameterError(
                f"Invalid dense query matrix for {query!r} of schema {self.name!r}: "
                f"{self.n_query_cells(query)} × {self.n_cells} entries exceed "
                f"{self.MAX_DENSE_ENTRIES}; answer it by index (cells_query_index, answer_sparse)"
            )
        rows = self.cell_query_index(query)
        m = np.zeros((self.n_query_cells(query), self.n_cells), dtype=np.int8)
        m[rows, np.arange(self.n_cells)] = 1
        return m

    def answer(self, histograms: npt.ArrayLike, query: str) -> npt.NDArray[np.generic]:
        """The query's answers for histograms whose last axis holds the detailed cells.

        Sums cells without a dense matrix product (exact for integers, any leading shape).
        """
        h = np.asarray(histograms)
        if h.ndim == 0 or h.shape[-1] != self.n_cells:
            raise InvalidParameterError(
                f"Invalid histograms of shape {h.shape} for schema {self.name!r}; "
                f"the last axis must hold its {self.n_cells} detailed cells"
            )
        axes = self._query_axes(query)
        keep = [i for i, _ in axes]
        k = len(self.attributes)
        lead = h.ndim - 1
        drop = tuple(lead + i for i in range(k) if i not in keep)
        summed = h.reshape(h.shape[:-1] + self.shape).sum(axis=drop)
        for pos, (i, r) in enumerate(axes):
            if r is None:
                continue
            m = self._level_maps[(i, r)]
            onehot = np.zeros((m.size, int(m.max()) + 1), dtype=summed.dtype)
            onehot[np.arange(m.size), m] = 1
            summed = np.moveaxis(np.moveaxis(summed, lead + pos, -1) @ onehot, -1, lead + pos)
        return summed.reshape((*h.shape[:-1], self.n_query_cells(query)))

    def answer_sparse(
        self, cells: npt.ArrayLike, counts: npt.ArrayLike, query: str
    ) -> npt.NDArray[np.int64]:
        """The query's answers (int64, ``(n_query_cells,)``) for one sparse histogram: ``counts[j]``
        people in detailed cell ``cells[j]`` (repeated cells add up)."""
        c = np.asarray(cells)
        n = np.asarray(counts)
        if c.shape != n.shape or c.ndim != 1:
            raise InvalidParameterError(
                f"Invalid sparse histogram: cells {c.shape} and counts {n.shape}; give two 1-D "
                "arrays of one length"
            )
        out = np.zeros(self.n_query_cells(query), dtype=np.int64)
        np.add.at(out, self.cells_query_index(query, c), n.astype(np.int64))
        return out

    def cell_labels(self, query: str) -> tuple[str, ...]:
        """Labels of the query's cells: the kept levels (or recode groups) joined by ``"/"``
        (``("total",)`` for the total)."""
        axes = self._query_axes(query)
        if not axes:
            return (TOTAL,)
        labels: list[str] = [""]
        for i, r in axes:
            a = self.attributes[i]
            names = a.levels if r is None else a.recode(r).labels
            labels = [
                (f"{prefix}{LABEL_SEPARATOR}{lv}" if prefix else lv)
                for prefix in labels
                for lv in names
            ]
        return tuple(labels)


VOTINGAGE = Attribute("votingage", ("under18", "18plus"))
HISPANIC = Attribute("hispanic", ("not_hispanic", "hispanic"))
#: six single races of the 2020 Census and "two or more races" (the Bureau's CENRACE has 63 levels)
RACE7 = Attribute(
    "race", ("white", "black", "aian", "asian", "nhpi", "sor", "two_or_more"), aliases=("cenrace",)
)


def _recodes(specs: Iterable[RecodeSpec]) -> tuple[Recode, ...]:
    return tuple(Recode(name, groups, labels) for name, groups, labels in specs)


#: the Bureau's attributes (:mod:`auditlib.geography.census_levels`), named as its DAS names them
HHGQ = Attribute("hhgq", census.HHGQ_LEVELS, recodes=_recodes(census.HHGQ_RECODES))
CENRACE = Attribute("cenrace", census.CENRACE_LEVELS)
RELGQ = Attribute("relgq", census.RELGQ_LEVELS, recodes=_recodes(census.RELGQ_RECODES))
SEX = Attribute("sex", census.SEX_LEVELS)
AGE = Attribute("age", census.AGE_LEVELS, recodes=_recodes(census.AGE_RECODES))

_SCHEMAS: dict[str, AttributeSchema] = {
    "total": AttributeSchema("total", ()),
    "pl94": AttributeSchema("pl94", (VOTINGAGE, HISPANIC, RACE7)),
    "pl94_production": AttributeSchema("pl94_production", (HHGQ, VOTINGAGE, HISPANIC, CENRACE)),
    "dhc_production": AttributeSchema("dhc_production", (RELGQ, SEX, AGE, HISPANIC, CENRACE)),
}


def schema_names() -> tuple[str, ...]:
    """Names accepted by :func:`schema`."""
    return tuple(_SCHEMAS)


def schema(name: str) -> AttributeSchema:
    """A shipped schema by name: ``"total"`` (1 cell), ``"pl94"`` (2 × 2 × 7 = 28 cells),
    ``"pl94_production"`` (2,016 cells) or ``"dhc_production"`` (1,227,744 cells)."""
    try:
        return _SCHEMAS[name]
    except (KeyError, TypeError):
        raise UnknownNameError(
            f"Unknown attribute schema {name!r}; choose one of {list(_SCHEMAS)}"
        ) from None


def custom_schema(name: str, attributes: Iterable[tuple[str, Iterable[str]]]) -> AttributeSchema:
    """A schema from ``(attribute name, levels)`` pairs, e.g. a race schema for real counts."""
    return AttributeSchema(name, tuple(Attribute(a, tuple(levels)) for a, levels in attributes))
