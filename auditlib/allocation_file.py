"""Allocation files: the privacy-loss budget or the noise of every query of a release, read from a
CSV (or TOML) file and checked row by row; and the CSV a shipped allocation is written as.

One row per measured query::

    geolevel,query,cells,mechanism,rho,sigma2,scale,sigma,sensitivity,neighbours

``geolevel``, ``query`` and ``mechanism`` are required; a row gives exactly one of ``rho`` (its zCDP
budget), ``sigma2`` (discrete Gaussian variance parameter σ²), ``scale`` (two-sided geometric or
Laplace scale b: ``P(k) ∝ e^(-|k|/b)``) and ``sigma`` (Gaussian standard deviation σ). Numbers are
read exactly (``0.1`` is 1/10, ``1/3`` a fraction). ``universe``, ``region`` (defaults ``persons``,
``US``), ``cells`` (default 1), ``histogram`` and ``product`` are optional. ``neighbours``
(``add_remove`` or ``bounded``, the same on every row) fixes the neighbour relation the file is
accounted under; ``sensitivity`` (needs ``neighbours``) is how many of a query's cells one
neighbouring change moves, each by one (default 1 under ``add_remove``, 2 under ``bounded``, as for
the Bureau's marginal queries). A file without ``neighbours`` gives ρ only (like the shipped
allocations) and is read under either relation. The user guide (``docs/guide.md``) tells the rest.

This module only parses and formats; :mod:`auditlib.allocations` turns rows into an allocation.
"""

from __future__ import annotations

import csv
import io
import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from auditlib.exceptions import InvalidParameterError

MECHANISMS: tuple[str, ...] = ("discrete_gaussian", "geometric", "laplace", "gaussian")
NOISE_COLUMNS: tuple[str, ...] = ("rho", "sigma2", "scale", "sigma")

#: the noise columns each mechanism may be given by
MECHANISM_NOISE: dict[str, tuple[str, ...]] = {
    "discrete_gaussian": ("rho", "sigma2"),
    "gaussian": ("rho", "sigma"),
    "geometric": ("scale",),
    "laplace": ("scale",),
}

REQUIRED_COLUMNS: tuple[str, ...] = ("geolevel", "query", "mechanism")
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "universe",
    "region",
    "cells",
    "histogram",
    "product",
    "sensitivity",
    "neighbours",
)
COLUMNS: tuple[str, ...] = (
    "universe",
    "region",
    "geolevel",
    "query",
    "histogram",
    "cells",
    "mechanism",
    *NOISE_COLUMNS,
    "sensitivity",
    "neighbours",
    "product",
)
"""Every column an allocation file may hold, in the order an exported file lists them."""

SUFFIXES: tuple[str, ...] = (".csv", ".toml")
_NEIGHBOURS = ("add_remove", "bounded")

MIN_VALUE = Fraction(1, 10**12)
MAX_VALUE = Fraction(10**12)
"""Every number of a noise column (ρ, σ², scale, σ) lies in [1e-12, 1e12]. The accountant and the
simulation compute in float64 from ρ = Δ/(2σ²) or ε = Δ/b: beyond this range those overflow,
underflow or lose the noise (a discrete Gaussian is drawn up to σ² = 1e12; at σ² = 1e-12 it is 0
but with probability 1e-(2e11)). The Bureau's ρ per query lie in [1e-4, 1]."""

MAX_SENSITIVITY = 2**21
"""Largest ``sensitivity`` (cells one neighbouring change moves): the accountant composes that
many terms of the query's noise, on a lattice whose width grows like √Δ and whose convolutions
grow like Δ; 2,097,152 is above the cells of the largest query any shipped allocation measures
(1,578,528), and a change moves at most every cell of a query."""

#: the longest field the CSV reader takes (the ``csv`` module's default limit)
MAX_FIELD_CHARS = csv.field_size_limit()


@dataclass(frozen=True)
class FileRow:
    """One query of an allocation file, checked; ``where`` names its line (or TOML entry)."""

    where: str
    universe: str
    region: str
    geolevel: str
    query: str
    histogram: str
    product: str
    cells: int
    mechanism: str
    noise_column: str  # one of NOISE_COLUMNS
    value: Fraction  # the number in ``noise_column``
    sensitivity: int | None


@dataclass(frozen=True)
class AllocationFile:
    """A parsed allocation file: its rows and the neighbour relation it fixes (or ``None``)."""

    origin: str
    neighbours: str | None
    rows: tuple[FileRow, ...]


def is_allocation_path(value: str) -> bool:
    """Whether ``value`` names an allocation file rather than a shipped id."""
    return Path(value).suffix.lower() in SUFFIXES or "/" in value or "\\" in value


def _error(origin: str, where: str, column: str | None, message: str) -> InvalidParameterError:
    at = f"{where}, column {column!r}" if column else where
    return InvalidParameterError(f"Invalid allocation file {origin!r}, {at}: {message}")


def _number(origin: str, where: str, column: str, text: str) -> Fraction:
    t = text.strip()
    low = t.lower().lstrip("+-")
    if low in ("nan", "inf", "infinity"):
        raise _error(origin, where, column, f"{text!r} is not finite; give a positive number")
    try:
        value = Fraction(t)
    except (ValueError, ZeroDivisionError):
        raise _error(
            origin, where, column, f"{text!r} is not a number; give e.g. 0.25 or 1/4"
        ) from None
    if value <= 0:
        raise _error(origin, where, column, f"{text!r} must be > 0")
    if not MIN_VALUE <= value <= MAX_VALUE:
        raise _error(
            origin,
            where,
            column,
            f"{text!r} is outside [1e-12, 1e12], the range dpaudit accounts and simulates "
            "(float64); give a value in that range",
        )
    return value


def _count(origin: str, where: str, column: str, text: str) -> int:
    t = text.strip()
    # ASCII digits only: str.isdigit() also takes '²' or '٣', which int() refuses
    if not (t.isascii() and t.isdigit()) or int(t) <= 0:
        raise _error(
            origin, where, column, f"{text!r} is not a positive integer; give digits 0-9, e.g. 2"
        )
    return int(t)


def _row(origin: str, where: str, cells: Mapping[str, str]) -> tuple[FileRow, str]:
    """One checked row, and its neighbour relation ('' if none given)."""

    def text(col: str, default: str = "") -> str:
        return (cells.get(col) or "").strip() or default

    for col in ("geolevel", "query"):
        if not text(col):
            raise _error(origin, where, col, "is empty; every row names its geolevel and query")
    mech = text("mechanism")
    if mech not in MECHANISMS:
        raise _error(
            origin,
            where,
            "mechanism",
            f"unknown mechanism {mech!r}; allowed: {', '.join(MECHANISMS)}",
        )
    given = [c for c in NOISE_COLUMNS if text(c)]
    allowed = MECHANISM_NOISE[mech]
    if len(given) != 1:
        raise _error(
            origin,
            where,
            "/".join(given or NOISE_COLUMNS),
            f"a {mech} row gives exactly one of {', '.join(allowed)}; got "
            + (", ".join(given) if given else "none"),
        )
    column = given[0]
    if column not in allowed:
        raise _error(
            origin, where, column, f"a {mech} row gives {' or '.join(allowed)}, not {column}"
        )
    nb = text("neighbours")
    if nb and nb not in _NEIGHBOURS:
        raise _error(
            origin,
            where,
            "neighbours",
            f"unknown neighbour relation {nb!r}; allowed: {', '.join(_NEIGHBOURS)}",
        )
    row = FileRow(
        where=where,
        universe=text("universe", "persons"),
        region=text("region", "US"),
        geolevel=text("geolevel"),
        query=text("query"),
        histogram=text("histogram", "main"),
        product=text("product"),
        cells=_count(origin, where, "cells", text("cells")) if text("cells") else 1,
        mechanism=mech,
        noise_column=column,
        value=_number(origin, where, column, text(column)),
        sensitivity=(
            _count(origin, where, "sensitivity", text("sensitivity"))
            if text("sensitivity")
            else None
        ),
    )
    if row.sensitivity is not None and row.sensitivity > MAX_SENSITIVITY:
        raise _error(
            origin,
            where,
            "sensitivity",
            f"{row.sensitivity:,} is above MAX_SENSITIVITY = {MAX_SENSITIVITY:,} (the accountant "
            "composes that many terms of the query's noise); give the cells one neighbouring "
            "change moves, at most every cell of the query",
        )
    return row, nb


def _check_rows(
    origin: str, records: Iterable[tuple[str, Mapping[str, str]]], header_where: str
) -> AllocationFile:
    rows: list[FileRow] = []
    relations: dict[str, str] = {}  # relation -> where first seen
    seen: dict[tuple[str, str, str, str], str] = {}
    for where, cells in records:
        row, nb = _row(origin, where, cells)
        key = (row.universe, row.region, row.geolevel, row.query)
        if key in seen:
            raise _error(
                origin,
                where,
                "query",
                f"duplicate query {row.query!r} at geolevel {row.geolevel!r} (universe "
                f"{row.universe!r}, region {row.region!r}), first on {seen[key]}; give each "
                "(geolevel, query) once",
            )
        seen[key] = where
        if nb:
            relations.setdefault(nb, where)
        rows.append(row)
    if not rows:
        raise _error(origin, header_where, None, "the file holds no query rows")
    if len(relations) > 1:
        (a, wa), (b, wb) = list(relations.items())[:2]
        raise _error(
            origin,
            wb,
            "neighbours",
            f"{b!r} differs from {a!r} on {wa}; one file has one neighbour relation",
        )
    neighbours = next(iter(relations), None)
    if neighbours is None:
        for row in rows:
            if row.noise_column != "rho":
                raise _error(
                    origin,
                    row.where,
                    row.noise_column,
                    "a row giving the noise needs the neighbour relation it is accounted under; "
                    "add a neighbours column (add_remove or bounded)",
                )
            if row.sensitivity is not None:
                raise _error(
                    origin,
                    row.where,
                    "sensitivity",
                    "a sensitivity is relative to a neighbour relation; add a neighbours column "
                    "(add_remove or bounded)",
                )
    return AllocationFile(origin, neighbours, tuple(rows))


def parse_csv(text: str, origin: str) -> AllocationFile:
    """Check the CSV text of an allocation file (``origin`` names it in errors)."""
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    header: list[str] | None = None
    records: list[tuple[str, dict[str, str]]] = []
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise _error(
                origin,
                f"line {reader.line_num}",
                None,
                f"not readable as CSV ({exc}; a field holds at most {MAX_FIELD_CHARS:,} "
                "characters); check the quotes and the line's fields",
            ) from None
        if not any(f.strip() for f in fields):
            continue  # blank line
        where = f"line {reader.line_num}"
        if header is None:
            header = [f.strip() for f in fields]
            _check_header(origin, where, header)
            continue
        if len(fields) > len(header):
            raise _error(
                origin,
                where,
                None,
                f"{len(fields)} fields but the header names {len(header)}; quote a value "
                'holding a comma ("a, b")',
            )
        records.append((where, dict(zip(header, fields, strict=False))))
    if header is None:
        raise _error(
            origin,
            "line 1",
            None,
            "the file is empty; its first line is the header, e.g. "
            "geolevel,query,cells,mechanism,rho",
        )
    return _check_rows(origin, records, "line 2")


def _check_header(origin: str, where: str, header: list[str]) -> None:
    for col in header:
        if col not in COLUMNS:
            raise _error(
                origin, where, col, f"unknown column {col!r}; allowed: {', '.join(COLUMNS)}"
            )
    dupes = [c for c in header if header.count(c) > 1]
    if dupes:
        raise _error(origin, where, dupes[0], "the column is named twice")
    for col in REQUIRED_COLUMNS:
        if col not in header:
            raise _error(
                origin,
                where,
                col,
                f"missing column {col!r}; required: {', '.join(REQUIRED_COLUMNS)}",
            )
    if not any(c in header for c in NOISE_COLUMNS):
        raise _error(
            origin,
            where,
            "rho",
            f"no noise column; give one of {', '.join(NOISE_COLUMNS)}",
        )


def parse_toml(text: str, origin: str) -> AllocationFile:
    """Check a TOML allocation file: optional top-level ``neighbours``, one ``[[query]]`` table per
    query with the CSV's columns as keys."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _error(origin, "TOML", None, f"not valid TOML: {exc}") from None
    except RecursionError:
        raise _error(
            origin,
            "TOML",
            None,
            "arrays or tables nested too deeply to be read (deeper than Python's recursion "
            "limit); an allocation file nests [[query]] tables of plain values only",
        ) from None
    extra = [k for k in data if k not in ("neighbours", "query")]
    if extra:
        raise _error(
            origin, "top level", extra[0], "unknown key; allowed: neighbours, [[query]] tables"
        )
    entries = data.get("query", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise _error(origin, "top level", "query", "give the queries as [[query]] tables")
    nb = data.get("neighbours")
    records = []
    for i, entry in enumerate(entries, start=1):
        where = f"[[query]] {i}"
        cells: dict[str, str] = {}
        for key, value in entry.items():
            if key not in COLUMNS:
                raise _error(
                    origin, where, key, f"unknown key {key!r}; allowed: {', '.join(COLUMNS)}"
                )
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise _error(origin, where, key, f"{value!r} is not a string or a number")
            cells[key] = repr(value) if isinstance(value, float) else str(value)
        if nb is not None and "neighbours" not in cells:
            cells["neighbours"] = str(nb)
        records.append((where, cells))
    if not records:
        raise _error(origin, "top level", None, "the file holds no [[query]] tables")
    return _check_rows(origin, records, "top level")


def read_allocation_file(path: str | Path) -> AllocationFile:
    """Read and check the allocation file at ``path`` (``.csv`` or ``.toml``)."""
    p = Path(path)
    origin = str(path)
    if p.suffix.lower() not in SUFFIXES:
        raise InvalidParameterError(
            f"Invalid allocation file {origin!r}: give a .csv or .toml file (docs/guide.md)"
        )
    if not p.is_file():
        raise InvalidParameterError(
            f"Invalid allocation: {origin!r} is neither a shipped allocation id nor an existing "
            "file; give the path of a .csv or .toml allocation file"
        )
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidParameterError(
            f"Invalid allocation file {origin!r}: cannot be read as UTF-8 text ({exc})"
        ) from None
    if p.suffix.lower() == ".toml":
        return parse_toml(text, origin)
    return parse_csv(text, origin)


def format_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    """CSV text of allocation rows (dicts keyed by :data:`COLUMNS`; only the columns any row uses
    are written, in the order of :data:`COLUMNS`)."""
    rows = list(rows)
    used = [c for c in COLUMNS if any(r.get(c) not in (None, "") for r in rows)]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=used, lineterminator="\n", extrasaction="raise")
    writer.writeheader()
    for r in rows:
        writer.writerow({c: _text(r.get(c)) for c in used})
    return out.getvalue()


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidParameterError(f"Invalid allocation value {value!r}: not finite")
    return str(value)
