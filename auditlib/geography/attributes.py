"""Attributes of a schema: categorical levels, their recodes (groups of levels), and name checks.

* :class:`Attribute` — a categorical attribute: its name, its levels in histogram order, aliases
  accepted in query names and its recodes.
* :class:`Recode` — groups of an attribute's levels kept as one query axis (the DAS's ``recode…``
  methods); the groups partition the levels.
* :data:`TOTAL`, :data:`DETAILED` — the two special query names (no attribute; all attributes),
  which no attribute may take; :data:`LABEL_SEPARATOR` joins level names in a cell label.

The schemas built from them, and their queries, are in :mod:`auditlib.geography.schema`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError, UnknownNameError

TOTAL = "total"
DETAILED = "detailed"
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


_T = TypeVar("_T")


def _tuple_of(
    cls: type[_T], items: Iterable[object], what: str, owner: str, usage: str
) -> tuple[_T, ...]:
    """``items`` as a tuple of ``cls``; else an error ``"Invalid <what> <item> of <owner>; give
    <usage>"`` for the first that is not one."""
    out = tuple(items)
    for item in out:
        if not isinstance(item, cls):
            raise InvalidParameterError(f"Invalid {what} {item!r} of {owner}; give {usage}")
    return out  # type: ignore[return-value]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_NamedT = TypeVar("_NamedT", bound=_Named)


def _by_name(items: Sequence[_NamedT], name: str, unknown: str) -> _NamedT:
    """The item of ``items`` called ``name``; else an error ``"Unknown <unknown>; choose one of
    <the names>"``."""
    for item in items:
        if item.name == name:
            return item
    raise UnknownNameError(f"Unknown {unknown}; choose one of {[i.name for i in items]}")


@dataclass(frozen=True)
class Recode:
    """Groups of an attribute's levels kept as one query axis (the DAS's ``recode…`` methods).

    ``groups[g]`` lists the level indices of group ``g`` (in the DAS's group order, which is the
    query's cell order); the groups partition the attribute's levels, so every detailed cell lies in
    exactly one row of a query that keeps the recode. ``labels`` name the groups.
    """

    name: str
    groups: tuple[tuple[int, ...], ...]
    labels: tuple[str, ...]

    def __post_init__(self) -> None:
        _check_name("recode", self.name)
        groups = tuple(tuple(int(i) for i in g) for g in self.groups)
        object.__setattr__(self, "groups", groups)
        labels = tuple(self.labels)
        object.__setattr__(self, "labels", labels)
        if not groups or any(not g for g in groups):
            raise InvalidParameterError(
                f"Invalid groups of recode {self.name!r}: {groups!r}; give non-empty groups"
            )
        if len(labels) != len(groups):
            raise InvalidParameterError(
                f"Invalid labels of recode {self.name!r}: {len(labels)} labels for "
                f"{len(groups)} groups; give one label per group"
            )
        for label in labels:
            _check_name(f"label (of recode {self.name!r})", label)
        _check_unique(f"labels of recode {self.name!r}:", "label", labels)

    def level_map(self, n_levels: int) -> npt.NDArray[np.int64]:
        """The group of every level (shape ``(n_levels,)``), or an error unless the groups partition
        ``range(n_levels)``."""
        flat = sorted(i for g in self.groups for i in g)
        if flat != list(range(n_levels)):
            raise InvalidParameterError(
                f"Invalid groups of recode {self.name!r}: they cover levels {flat[:8]}…, not each "
                f"of 0..{n_levels - 1} exactly once; a recode must partition its attribute's levels"
            )
        out = np.empty(n_levels, dtype=np.int64)
        for g, levels in enumerate(self.groups):
            out[list(levels)] = g
        return out


@dataclass(frozen=True)
class Attribute:
    """A categorical attribute: its name and its levels, in histogram order.

    ``aliases`` are other names accepted in query names (e.g. the Bureau's ``cenrace`` for ``race``);
    ``recodes`` group its levels into coarser query axes (:class:`Recode`).
    """

    name: str
    levels: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    recodes: tuple[Recode, ...] = ()

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
        owner = f"attribute {self.name!r}"
        recodes = _tuple_of(Recode, self.recodes, "recode", owner, "Recode(name, groups, labels)")
        object.__setattr__(self, "recodes", recodes)
        for r in recodes:
            r.level_map(len(levels))

    @property
    def n_levels(self) -> int:
        return len(self.levels)

    def recode(self, name: str) -> Recode:
        """The recode called ``name``."""
        return _by_name(self.recodes, name, f"recode {name!r} of attribute {self.name!r}")
