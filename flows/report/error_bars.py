"""The error bars section of a published table's store (``release.kind = "published"``): the
intervals' widths by level and size of the published count, what the coverage study measured of
the method (read from the shipped study, ``benchmarks/results/amc_coverage.csv``, when this
dpaudit has it; else the docs are cited), its assumptions, and the link to the CSV of every
interval written beside the store."""

from __future__ import annotations

import csv
import os
import pathlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from flows.report.format import fmt_num
from flows.report.store_data import parse_spec_toml, str_values

if TYPE_CHECKING:
    from storage.result_store import ResultStore

#: the groups (``flows.audit.published_errors``)
UNITS_GROUP = "published_errors"
AREAS_GROUP = "published_area_errors"
#: size bins of a published count (label, lowest, highest)
BINS = (("0", 0, 0), ("1–9", 1, 9), ("10–99", 10, 99), ("100+", 100, np.inf))
#: the coverage study shipped with the source (``benchmarks/amc_coverage.py``)
STUDY = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "amc_coverage.csv"
STUDY_DOC = "docs/published_error_bars.md"
ASSUMPTIONS = (
    "The intervals assume that TopDown errs at the published counts as it erred at the true "
    "ones (same allocation, same post-processing), and that the error is roughly Gaussian; "
    "they fail for small counts near zero, where non-negativity biases the release, so read "
    "intervals of counts below about 10 as indicative only."
)


@dataclass
class ErrorBarsSection:
    level: str
    replicates: int
    interval: str
    rows: list[dict[str, str]]
    coverage: list[dict[str, str]] = field(default_factory=list)
    coverage_note: str = ""
    csv_href: str = ""
    csv_name: str = ""
    areas_file: str = ""
    assumptions: str = ASSUMPTIONS

    def summary(self) -> str:
        n = sum(int(r["counts"].replace(",", "")) for r in self.rows)
        return (
            f"Error bars of {n:,} published counts: {self.level} % intervals of the true counts "
            f"from {self.replicates} TopDown runs started from the published ones (approximate "
            "Monte Carlo); section 1 gives their widths by level and count size."
        )


def allocation_of(attrs: dict[str, Any]) -> str:
    """The allocation whose TopDown the error bars rerun (the stored spec's; the store's
    ``allocation_id`` is an accounted release's only)."""
    spec = parse_spec_toml(attrs.get("spec_toml"))
    return str(spec.get("audit", {}).get("allocation", "")) or "—"


#: the rows of a group read at a time (:func:`width_rows`; ``published_errors.READ_ROWS``)
SLICE_ROWS = 250_000


def open_error_bars(store: ResultStore) -> list[xr.Dataset]:
    """The store's error bars groups (units, then areas), opened lazily (read in slices by
    :func:`width_rows`); [] for any other store."""
    out = []
    for g in (UNITS_GROUP, AREAS_GROUP):
        try:
            ds = store.dataset(g)
        except (FileNotFoundError, KeyError, OSError, ValueError):
            continue
        out.append(ds)
    return out


def width_rows(datasets: list[xr.Dataset], rows: int = SLICE_ROWS) -> list[dict[str, str]]:
    """Per level (areas last) and size bin of the published count: counts, the median, mean and
    largest width of their intervals and the share bias-corrected. Each group is read ``rows``
    rows at a time; only the widths and whether they are corrected are kept."""
    out = []
    for ds in datasets:
        kept: dict[str, dict[str, list[tuple[np.ndarray, np.ndarray]]]] = {}
        n = int(ds.sizes["row"])
        for a in range(0, n, max(1, int(rows))):
            part = ds[["published", "upper", "lower", "bias_corrected"]].isel(
                row=slice(a, min(a + int(rows), n))
            )
            levels = np.asarray(str_values(part["level"].values))
            p = np.asarray(part["published"].values, dtype=float)
            width = np.asarray(part["upper"].values - part["lower"].values, dtype=float)
            corrected = np.asarray(part["bias_corrected"].values, dtype=bool)
            for lv in dict.fromkeys(levels.tolist()):
                bins = kept.setdefault(str(lv), {})
                for label, lo, hi in BINS:
                    m = (levels == lv) & (p >= lo) & (p <= hi)
                    if m.any():
                        bins.setdefault(label, []).append((width[m], corrected[m]))
        for lv, bins in kept.items():
            for label, _, _ in BINS:
                if label not in bins:
                    continue
                w = np.concatenate([x for x, _ in bins[label]])
                c = np.concatenate([x for _, x in bins[label]])
                out.append(
                    {
                        "level": lv,
                        "bin": label,
                        "counts": f"{w.size:,}",
                        "median": fmt_num(float(np.median(w)), 3),
                        "mean": fmt_num(float(w.mean()), 3),
                        "max": fmt_num(float(w.max()), 3),
                        "corrected": f"{100 * c.mean():.0f} %",
                    }
                )
    return out


def study_rows(path: pathlib.Path = STUDY) -> list[dict[str, str]]:
    """The shipped coverage study's coverage of the Bureau's interval (``coverage_ct``) per
    target and size bin of the true count, every query cell pooled; [] without the file."""
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("queries") == "all"]
    return [
        {
            "target": r["target"],
            "bin": r["size_bin"].replace("-", "–"),
            "counts": r["counts"],
            "coverage": fmt_num(float(r["coverage_ct"]), 3),
            "replicates": r.get("replicates", ""),
            "published": r.get("published", ""),
        }
        for r in rows
    ]


def csv_link(store: str, output: pathlib.Path) -> tuple[str, str]:
    """(href relative to the report, file name) of the CSV beside a local store; ("", "") for
    a remote one or none there (``dpaudit run`` writes it beside local stores, before the
    report)."""
    from flows.audit.published_errors import csv_path_for

    if "://" in store:
        return "", ""
    path = csv_path_for(store).resolve()
    if not path.is_file():
        return "", ""
    href = os.path.relpath(path, output.resolve().parent)
    return pathlib.PurePath(href).as_posix(), path.name


def error_bars_section(
    datasets: list[xr.Dataset], store: str, output: pathlib.Path
) -> ErrorBarsSection | None:
    """The section of a store's error bars groups (``None``: it has none)."""
    if not datasets:
        return None
    a = datasets[0].attrs
    alpha = float(a.get("alpha", 0.1))
    study = study_rows()
    note = (
        f"The coverage study ({STUDY_DOC}, “Measured coverage”; "
        f"{STUDY.name}): a synthetic state with the pl94 schema and the pl94_2021_production "
        f"allocation, released {study[0]['published'] if study else '200'} times, "
        f"{study[0]['replicates'] if study else '25'} AMC runs from each release; the share of "
        "nominal 90 % intervals that held the true count, by level and size of the true count. "
        + (
            f"This run's intervals are at {100 * (1 - alpha):g} %, not 90 %: the study does not "
            "apply as is. "
            if abs(alpha - 0.1) > 1e-12
            else ""
        )
        + (
            f"This run has {a.get('replicates')} runs: with fewer than 25 the study measured "
            "lower coverage (below 90 % on blocks' small counts with 10)."
            if int(a.get("replicates", 25)) < 25
            else ""
        )
    )
    href, name = csv_link(store, output)
    return ErrorBarsSection(
        level=f"{100 * (1 - alpha):g}",
        replicates=int(a.get("replicates", 0)),
        interval=str(a.get("interval", "")),
        rows=width_rows(datasets),
        coverage=study,
        coverage_note=note
        if study
        else (
            f"How often such intervals hold the true count was measured on synthetic states: see "
            f"{STUDY_DOC}, “Measured coverage”."
        ),
        csv_href=href,
        csv_name=name,
        areas_file=str(a.get("areas_file", "")),
    )
