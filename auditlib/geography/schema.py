"""Attribute schemas: the cells of a population histogram and the marginal queries measured on it.

A schema is a list of categorical attributes; the *detailed histogram* of a geounit counts its people
in every combination of levels, flattened in C order (the last attribute varies fastest), so a schema
with level counts ``(2, 2, 7)`` has 28 cells and cell ``(a, h, r)`` is ``a·14 + h·7 + r``.

A *query* is the marginal over a subset of the attributes, named like the Census Bureau's DAS names its
queries: the attribute names joined by ``" * "`` in schema order (``"votingage * hispanic"``), with two
special names: ``"total"`` (no attribute, one cell) and ``"detailed"`` (all attributes). A query's
answer is ``query_matrix(q) @ histogram``; every detailed cell lies in exactly one row of every query.

Shipped schemas (:func:`schema`):

* ``"total"`` — no attribute; one cell (the population count).
* ``"pl94"`` — PL94-171-like persons: voting age (2) × Hispanic origin (2) × a reduced race (7: the six
  single races of the 2020 Census and "two or more races") = 28 cells. The Bureau's CENRACE has 63
  levels (every non-empty combination of six races) and its detailed histogram adds HHGQ (8); both are
  reduced here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError, UnknownNameError

TOTAL = "total"
DETAILED = "detailed"
#: joins attribute names in a query name, as in the Bureau's DAS (``"votingage * hispanic"``)
QUERY_SEPARATOR = " * "
#: joins level names in a cell label (``"18plus/hispanic/white"``)
LABEL_SEPARATOR = "/"


def _check_name(kind: str, name: object) -> str:
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise InvalidParameterError(
            f"Invalid {kind} name: {name!r}; it must be a non-empty string without "
            "surrounding spaces"
        )
    if "*" in name or LABEL_SEPARATOR in name:
        raise InvalidParameterError(
            f"Invalid {kind} name: {name!r}; it must not contain '*' or {LABEL_SEPARATOR!r}"
        )
    return name


def _check_unique(what: str, kind: str, names: Sequence[str]) -> None:
    """Error naming the repeated ``names`` (sorted) of ``what``, if any."""
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidParameterError(
            f"Invalid {what} {duplicates} repeated; {kind} names must be unique"
        )


@dataclass(frozen=True)
class Attribute:
    """A categorical attribute: its name and its levels, in histogram order.

    ``aliases`` are other names accepted in query names (e.g. the Bureau's ``cenrace`` for ``race``).
    """

    name: str
    levels: tuple[str, ...]
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_name("attribute", self.name)
        object.__setattr__(self, "aliases", tuple(self.aliases))
        for alias in self.aliases:
            _check_name(f"alias (of attribute {self.name!r})", alias)
        if self.name in (TOTAL, DETAILED):
            raise InvalidParameterError(
                f"Invalid attribute name: {self.name!r}; {TOTAL!r} and {DETAILED!r} name queries"
            )
        levels = tuple(self.levels)
        object.__setattr__(self, "levels", levels)
        if not levels:
            raise InvalidParameterError(
                f"Invalid levels of attribute {self.name!r}: (); give at least one level"
            )
        for level in levels:
            _check_name(f"level (of attribute {self.name!r})", level)
        _check_unique(f"levels of attribute {self.name!r}:", "level", levels)

    @property
    def n_levels(self) -> int:
        return len(self.levels)


@dataclass(frozen=True)
class AttributeSchema:
    """Named attributes whose level combinations are the cells of a detailed histogram (C order)."""

    name: str
    attributes: tuple[Attribute, ...]

    def __post_init__(self) -> None:
        _check_name("schema", self.name)
        attributes = tuple(self.attributes)
        object.__setattr__(self, "attributes", attributes)
        for a in attributes:
            if not isinstance(a, Attribute):
                raise InvalidParameterError(
                    f"Invalid attribute {a!r} of schema {self.name!r}; give Attribute(name, levels)"
                )
        names = [n for a in attributes for n in (a.name, *a.aliases)]
        _check_unique(f"schema {self.name!r}: attributes", "attribute", names)

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
        for a in self.attributes:
            if a.name == name:
                return a
        raise UnknownNameError(
            f"Unknown attribute {name!r} in schema {self.name!r}; "
            f"choose one of {list(self.attribute_names)}"
        )

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

    @property
    def query_names(self) -> tuple[str, ...]:
        """Every marginal query: ``"total"``, each attribute, each pair, …, ``"detailed"``.

        Without attributes the total is the detailed histogram, and only ``"total"`` is listed
        (``"detailed"`` is still accepted by the methods below).
        """
        return tuple(self._queries)

    def query_attributes(self, query: str) -> tuple[str, ...]:
        """Names of the attributes a query keeps, in schema order (``()`` for the total).

        Accepts the names in :attr:`query_names` and any ``" * "``-joined set of attribute names,
        in any order (``"race * votingage"`` is ``"votingage * race"``; all attributes is detailed).
        """
        return tuple(self.attributes[i].name for i in self._query_indices(query))

    def _query_indices(self, query: str) -> tuple[int, ...]:
        if not isinstance(query, str):
            raise UnknownNameError(
                f"Unknown query {query!r} of schema {self.name!r}; "
                f"choose one of {list(self.query_names)}"
            )
        if query in self._queries:
            return self._queries[query]
        if query == DETAILED:  # a schema without attributes
            return ()
        parts = [p.strip() for p in query.split("*")]
        index = {n: i for i, a in enumerate(self.attributes) for n in (a.name, *a.aliases)}
        parts = [self.attributes[index[p]].name if p in index else p for p in parts]
        index = {a.name: i for i, a in enumerate(self.attributes)}
        if all(p in index for p in parts) and len(set(parts)) == len(parts):
            return tuple(sorted(index[p] for p in parts))
        raise UnknownNameError(
            f"Unknown query {query!r} of schema {self.name!r}; choose one of "
            f"{list(self.query_names)} (or attribute names joined by {QUERY_SEPARATOR!r})"
        )

    def canonical_query(self, query: str) -> str:
        """The entry of :attr:`query_names` that ``query`` names (aliases and any attribute order
        accepted: for ``"pl94"``, ``"cenrace * votingage"`` is ``"votingage * race"`` and
        ``"votingage * hispanic * cenrace"`` is ``"detailed"``)."""
        keep = self._query_indices(query)
        for name, idx in self._queries.items():
            if idx == keep:
                return name
        return TOTAL  # a schema without attributes: "detailed" is the total

    def has_query(self, query: str) -> bool:
        """Whether :meth:`canonical_query` accepts ``query``."""
        try:
            self._query_indices(query)
        except UnknownNameError:
            return False
        return True

    def query_shape(self, query: str) -> tuple[int, ...]:
        """Level counts of the attributes the query keeps (``()`` for the total)."""
        return tuple(self.attributes[i].n_levels for i in self._query_indices(query))

    def n_query_cells(self, query: str) -> int:
        return int(np.prod(self.query_shape(query), dtype=np.int64))

    def cell_query_index(self, query: str) -> npt.NDArray[np.int64]:
        """For every detailed cell, the row of ``query`` it falls in (shape ``(n_cells,)``)."""
        keep = self._query_indices(query)
        if not keep:
            return np.zeros(self.n_cells, dtype=np.int64)
        grids = np.indices(self.shape, dtype=np.int64).reshape(len(self.shape), -1)
        return np.ravel_multi_index(tuple(grids[i] for i in keep), self.query_shape(query)).astype(
            np.int64
        )

    def query_matrix(self, query: str) -> npt.NDArray[np.int8]:
        """0/1 matrix ``(n_query_cells, n_cells)``: row ``r`` sums the detailed cells of query cell ``r``.

        Query cells are in C order over the kept attributes, in schema order.
        """
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
        keep = self._query_indices(query)
        k = len(self.attributes)
        drop = tuple(h.ndim - 1 + i for i in range(k) if i not in keep)
        summed = h.reshape(h.shape[:-1] + self.shape).sum(axis=drop)
        return summed.reshape((*h.shape[:-1], self.n_query_cells(query)))

    def cell_labels(self, query: str) -> tuple[str, ...]:
        """Labels of the query's cells: the kept levels joined by ``"/"`` (``("total",)`` for the total)."""
        keep = self._query_indices(query)
        if not keep:
            return (TOTAL,)
        labels: list[str] = [""]
        for i in keep:
            labels = [
                (f"{prefix}{LABEL_SEPARATOR}{lv}" if prefix else lv)
                for prefix in labels
                for lv in self.attributes[i].levels
            ]
        return tuple(labels)


VOTINGAGE = Attribute("votingage", ("under18", "18plus"))
HISPANIC = Attribute("hispanic", ("not_hispanic", "hispanic"))
#: six single races of the 2020 Census and "two or more races" (the Bureau's CENRACE has 63 levels)
RACE7 = Attribute(
    "race", ("white", "black", "aian", "asian", "nhpi", "sor", "two_or_more"), aliases=("cenrace",)
)

_SCHEMAS: dict[str, AttributeSchema] = {
    "total": AttributeSchema("total", ()),
    "pl94": AttributeSchema("pl94", (VOTINGAGE, HISPANIC, RACE7)),
}


def schema_names() -> tuple[str, ...]:
    """Names accepted by :func:`schema`."""
    return tuple(_SCHEMAS)


def schema(name: str) -> AttributeSchema:
    """A shipped schema by name: ``"total"`` (1 cell) or ``"pl94"`` (2 × 2 × 7 = 28 cells)."""
    try:
        return _SCHEMAS[name]
    except (KeyError, TypeError):
        raise UnknownNameError(
            f"Unknown attribute schema {name!r}; choose one of {list(_SCHEMAS)}"
        ) from None


def custom_schema(name: str, attributes: Iterable[tuple[str, Iterable[str]]]) -> AttributeSchema:
    """A schema from ``(attribute name, levels)`` pairs, e.g. a race schema for real counts."""
    return AttributeSchema(name, tuple(Attribute(a, tuple(levels)) for a, levels in attributes))
