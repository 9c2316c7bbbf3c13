"""The spec of error bars for published TopDown counts (``release.kind = "published"``): its
checks, and the areas file (the table's units mapped to user-defined areas) read.

The areas file is a CSV with a column named as the table's unit column (``population.unit``) and
one named ``area``: one row per (unit, area); a unit may belong to several areas or to none. Its
unit labels are read as the table's are (``pandas.read_csv``, then text), so ``007`` in both files
is the same unit only if it is written the same way in both."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from flows.spec.model import AuditSpec

#: the areas file's column of area names
AREA_COLUMN = "area"


def read_areas(path: str, unit_column: str, unit_labels: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Area name -> indices of its units in ``unit_labels`` (the table's bottom level, in the
    order of its histograms), areas in the order they first appear in the file; ``ValueError``
    naming the file and the bad value (a missing file or column, an unknown unit, no rows)."""
    p = Path(path)
    where = f"release.areas = {path!r}"
    if not p.is_file():
        raise ValueError(f"{where}: no such file; give a CSV with columns {unit_column!r}, 'area'")
    import pandas as pd  # here: only reading an areas file needs it

    try:
        frame = pd.read_csv(p)
    except (ValueError, OSError) as exc:  # pandas' parser errors are ValueErrors
        raise ValueError(f"{where} is not a readable CSV file: {exc}") from None
    missing = [c for c in (unit_column, AREA_COLUMN) if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{where}: Missing columns {missing}; it needs a column named as population.unit "
            f"({unit_column!r}) and one named {AREA_COLUMN!r} (it has {list(frame.columns)})"
        )
    if frame.empty:
        raise ValueError(f"{where} has no rows; map at least one unit to an area, or drop it")
    units = frame[unit_column].astype(str).str.strip()
    areas = frame[AREA_COLUMN].astype(str).str.strip()
    index = {label: i for i, label in enumerate(unit_labels)}
    unknown = sorted(set(units) - set(index))
    if unknown:
        row = int(np.flatnonzero(units.to_numpy() == unknown[0])[0])
        raise ValueError(
            f"{where}: unknown unit {unknown[0]!r} (row {row}"
            + (f", and {len(unknown) - 1} more" if len(unknown) > 1 else "")
            + f"); every unit must be a {unit_column!r} of population.path, e.g. {unit_labels[0]!r}"
        )
    out: dict[str, list[int]] = {}
    for u, a in zip(units, areas, strict=True):
        members = out.setdefault(a, [])
        if index[u] not in members:
            members.append(index[u])
    return {a: np.asarray(sorted(ix), dtype=np.int64) for a, ix in out.items()}


def check_published(spec: AuditSpec) -> None:
    """Error bars of a published table: at least 2 TopDown runs from it (a variance), and an
    areas file whose units are the table's."""
    r = spec.audit.replicates
    if r < 2:
        raise ValueError(
            f"audit.replicates = {r}: error bars need at least 2 TopDown runs from the published "
            "counts (a variance); the Census Bureau runs 25"
        )
    from auditlib.geography.schema import schema

    known = schema(spec.population.attributes).query_names
    for q in spec.release.queries:
        if q not in known:
            raise ValueError(
                f"release.queries has unknown query {q!r}; population.attributes = "
                f"{spec.population.attributes!r} has {', '.join(repr(k) for k in known)}"
            )
    if spec.release.areas:
        from flows.spec.sources import load_table

        p = spec.population
        tab = load_table(
            p.path, spec.table_counts, p.level_columns, p.unit, p.attributes, unique=True
        )
        read_areas(spec.release.areas, p.unit, tab.labels[tab.levels[-1]])
