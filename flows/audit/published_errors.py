"""Error bars of a published table (``release.kind = "published"``), as pure functions: the AMC
replicates of a range (:func:`amc_range`), the ranges a run is cut into, and the store's groups
and CSV built from the merged moments: each group an :class:`ErrorsGroup`, built and written in
parts of at most :data:`PART_ROWS` rows and read back :data:`READ_ROWS` rows at a time, so a
state's long tables are never held whole.

Groups: ``published_errors`` (every level's units) and, with an areas file,
``published_area_errors`` (the areas' sums, summed per replicate before their moments). Both are
long tables on one dimension ``row``: the level (``"areas"`` for the areas), the unit's (area's)
label, the query and the query cell's label, then the published count, the AMC bias, variance and
MSE, the interval's centre, lower and upper bound, and whether the centre is bias-corrected. The
attributes say alpha, R, the seed and how the interval is built."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from auditlib import seeds
from auditlib.published import AMCResult, Moments, amc_interval, amc_replicates

if TYPE_CHECKING:
    from flows.spec.audit_plan import AuditPlan

#: the groups the run writes
UNITS_GROUP = "published_errors"
AREAS_GROUP = "published_area_errors"
#: the level column's value of an area's rows
AREAS_LEVEL = "areas"
#: the AMC replicates' stream: ``SeedSequence(noise_seed, spawn_key=(AMC_REPLICATES,))``, replicate
#: ``r`` level ``j`` spawning ``(AMC_REPLICATES, r, j)`` (``auditlib.published.replicate_rngs``)
AMC_REPLICATES = 34
#: how the interval is built (the store's attribute, the report's words)
INTERVAL = (
    "the Census Bureau's AMC interval (Ashmead et al. 2024, 'ct'): centre P - bias where "
    "P > 5, |bias| >= sd/2 and (bias < 0 or P >= 25), else P; half-width t5(1 - alpha/2) x "
    "sqrt(MSE); lower bound floored at 0, bounds rounded outwards to integers"
)
#: the columns of the CSV, in order
CSV_COLUMNS = (
    "level", "unit", "query", "cell", "published", "lower", "upper", "centre", "bias_corrected",
    "bias", "variance", "mse",
)  # fmt: skip


def amc_seed(plan: AuditPlan) -> np.random.SeedSequence:
    """The seed of a plan's AMC replicates (stream :data:`AMC_REPLICATES` of its noise seed)."""
    return seeds.seed_sequence(plan.noise_seed, AMC_REPLICATES)


def replicate_ranges(n: int, per_task: int, tasks: int = 1) -> list[tuple[int, int]]:
    """``(first, count)`` of the ranges ``n`` replicates run in: about ``n / tasks`` each, at most
    ``per_task`` (0: no limit), a short tail joined to the range before it (a variance needs 2
    replicates)."""
    size = -(-n // max(tasks, 1))
    size = max(min(size, per_task) if per_task > 0 else size, 2)
    out = [(a, min(size, n - a)) for a in range(0, n, size)]
    if len(out) > 1 and out[-1][1] < 2:
        (a, k), (_, tail) = out[-2], out.pop()
        out[-1] = (a, k + tail)
    return out


def amc_inputs(plan: AuditPlan) -> dict[str, Any]:
    """What :func:`amc_replicates` runs on for a plan: the hierarchy and published histograms
    (the table's), the schema's query matrices, every level's measurements, the areas."""
    from auditlib.geography.schema import schema
    from flows.spec.published import read_areas
    from flows.spec.sources import table_hierarchy

    td, th = plan.topdown, plan.table_hierarchy
    assert td is not None and th is not None
    hierarchy, published = plan.strategy.state_population(plan, 1)
    sch = schema(td.schema)
    areas_file = getattr(plan.strategy, "areas", "")
    tab = table_hierarchy(th)
    return {
        "hierarchy": hierarchy,
        "published": published,
        "query_matrices": {q: sch.query_matrix(q) for q in sch.query_names},
        "measured": [list(td.measured[g]) for g in plan.geolevels],
        "areas": read_areas(areas_file, th.unit, tab.labels[tab.levels[-1]])
        if areas_file
        else None,
        "tol": td.tol,
        "queries": getattr(plan.strategy, "queries", ()) or None,  # None: every query
    }


def amc_range(plan: AuditPlan, first: int, n: int) -> AMCResult:
    """The AMC replicates ``first .. first + n - 1`` of a plan's published table (each keeps its
    own generators: ranges merged are one run's)."""
    x = amc_inputs(plan)
    return amc_replicates(
        x["hierarchy"],
        x["published"],
        x["query_matrices"],
        x["measured"],
        n,
        amc_seed(plan),
        queries=x["queries"],
        areas=x["areas"],
        first_replicate=first,
        tol=x["tol"],
    )


def unit_labels(plan: AuditPlan) -> list[tuple[str, ...]]:
    """Each level's unit labels (the root's: its level name), in the histograms' order."""
    from flows.spec.sources import table_hierarchy

    th = plan.table_hierarchy
    assert th is not None
    tab = table_hierarchy(th)
    return [(plan.geolevels[0],), *(tuple(tab.labels[lv]) for lv in tab.levels)]


#: the most rows a part of a group is built of (:meth:`ErrorsGroup.parts`): a part's columns
#: (four of strings, eight of numbers) take about 100 bytes a row, their strings shared
PART_ROWS = 1_000_000
#: the rows of a stored group read at a time (the CSV, the printed widths, the report): each row
#: read back holds four strings of its own, a few hundred bytes with its table's copies
READ_ROWS = 250_000


def _rows(level: str, labels: tuple[str, ...], query: str, cells: tuple[str, ...], m: Moments,
          alpha: float) -> dict[str, np.ndarray]:  # fmt: skip
    """The long rows of one (level, query): units × cells, unit-major."""
    iv = amc_interval(m, alpha)
    n, k = m.published.shape
    return {
        "level": np.full(n * k, level, dtype=object),
        "unit": np.repeat(np.asarray(labels, dtype=object), k),
        "query": np.full(n * k, query, dtype=object),
        "cell": np.tile(np.asarray(cells, dtype=object), n),
        "published": m.published.ravel(),
        "bias": m.bias.ravel(),
        "variance": m.variance.ravel(),
        "mse": m.mse.ravel(),
        "centre": iv.centre.ravel(),
        "lower": iv.lower.ravel(),
        "upper": iv.upper.ravel(),
        "bias_corrected": iv.bias_corrected.ravel(),
    }


def _dataset(parts: list[dict[str, np.ndarray]], attrs: dict[str, Any]) -> xr.Dataset:
    cols = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    coords = {c: ("row", cols.pop(c)) for c in ("level", "unit", "query", "cell")}
    return xr.Dataset({c: ("row", v) for c, v in cols.items()}, coords=coords, attrs=attrs)


@dataclass(frozen=True)
class ErrorsGroup:
    """One group's rows, to be built part after part (:meth:`parts`): its (level, labels, query,
    cells, moments) pieces in row order, each unit's cells together."""

    name: str
    pieces: tuple[tuple[str, tuple[str, ...], str, tuple[str, ...], Moments], ...]
    alpha: float
    attrs: dict[str, Any]

    @property
    def rows(self) -> int:
        return sum(m.published.size for *_, m in self.pieces)

    def parts(self, max_rows: int = PART_ROWS) -> Iterator[xr.Dataset]:
        """The group's rows in order, as datasets of whole units of at most ``max_rows`` rows
        each (one unit's cells at least): a (level, query)'s units cut into ranges, the ranges
        of small ones gathered into one part. The same rows, values and attributes as
        :meth:`whole`, cut along ``row``."""
        held: list[dict[str, np.ndarray]] = []
        size = 0
        for level, labels, query, cells, m in self.pieces:
            n, k = m.published.shape
            step = max(1, int(max_rows) // max(k, 1))
            for a in range(0, n, step):
                b = min(a + step, n)
                if held and size + (b - a) * k > max_rows:
                    yield _dataset(held, self.attrs)
                    held, size = [], 0
                sub = Moments(m.published[a:b], m.sum_dev[a:b], m.sum_sq_dev[a:b], m.n_replicates)
                held.append(_rows(level, labels[a:b], query, cells, sub, self.alpha))
                size += (b - a) * k
        if held:
            yield _dataset(held, self.attrs)

    def whole(self) -> xr.Dataset:
        """The group's rows at once (a small table's; a large one is written in :meth:`parts`)."""
        return _dataset([_rows(*p, self.alpha) for p in self.pieces], self.attrs)


def errors_groups(
    plan: AuditPlan, result: AMCResult, alpha: float, areas_file: str = ""
) -> list[ErrorsGroup]:
    """The groups of a run's merged AMC result: every level's units, and the areas' if any."""
    from auditlib.geography.schema import schema

    td = plan.topdown
    assert td is not None
    sch = schema(td.schema)
    attrs = {
        "alpha": alpha,
        "replicates": result.n_replicates,
        "noise_seed": plan.noise_seed,
        "amc_stream": AMC_REPLICATES,
        "interval": INTERVAL,
        "queries": list(result.queries),
        "levels": list(plan.geolevels),
        "schema": sch.name,
        "areas_file": Path(areas_file).name if areas_file else "",
    }
    labels = unit_labels(plan)
    units = tuple(
        (lv, labels[i], q, tuple(sch.cell_labels(q)), result.levels[lv][q])
        for i, lv in enumerate(result.level_names)
        for q in result.queries
    )
    out = [ErrorsGroup(UNITS_GROUP, units, alpha, attrs)]
    if result.areas:
        names = tuple(result.area_names)
        areas = tuple(
            (AREAS_LEVEL, names, q, tuple(sch.cell_labels(q)), result.areas[q])
            for q in result.queries
        )
        out.append(ErrorsGroup(AREAS_GROUP, areas, alpha, attrs))
    return out


def errors_datasets(
    plan: AuditPlan, result: AMCResult, alpha: float, areas_file: str = ""
) -> dict[str, xr.Dataset]:
    """The groups of :func:`errors_groups`, each built whole."""
    return {g.name: g.whole() for g in errors_groups(plan, result, alpha, areas_file)}


def errors_frame(*datasets: xr.Dataset) -> pd.DataFrame:
    """The groups' rows as one table in :data:`CSV_COLUMNS` order (units, then areas)."""
    frames = [ds.to_dataframe().reset_index(drop=True) for ds in datasets]
    frame = pd.concat(frames, ignore_index=True)
    frame["bias_corrected"] = frame["bias_corrected"].astype(bool)
    for c in ("published", "lower", "upper"):
        frame[c] = frame[c].astype(np.int64)
    return frame[list(CSV_COLUMNS)]


def csv_path_for(store_url: str) -> Path:
    """Where the CSV of a local store's error bars goes: beside it, ``<store>.errors.csv``
    (``results/audit.zarr`` -> ``results/audit.errors.csv``)."""
    p = Path(store_url.rstrip("/"))
    return p.with_name(f"{p.stem if p.suffix == '.zarr' else p.name}.errors.csv")
