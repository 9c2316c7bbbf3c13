"""Reading a result store for the report: its groups (opened lazily, without dask), root attributes,
string coordinates and attributes, arrays of a group, the EPL knobs a group was computed with, the
spec's name and the provenance of the run.

Nothing here draws or formats numbers; a group the store does not hold reads as ``None``.
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
import zarr

from storage.result_store import ResultStore
from storage.schema import CLAIMS

#: Optional groups of a result store, in report order.
GROUPS: tuple[str, ...] = ("accounting", "accuracy", "epl", "mpl", "residuals")
#: Group written by ``dpaudit mpl-coverage`` (flows/experiments/mpl_coverage.py); rendered on its own or beside MPL.
COVERAGE_GROUP = "mpl_coverage"
#: Group written by ``dpaudit fdp-coverage`` (flows/experiments/fdp_coverage.py); rendered on its own.
FDP_COVERAGE_GROUP = "fdp_coverage"
#: The claim verdict per accounted level (storage/schema.py; absent from older stores).
CLAIMS_GROUP = CLAIMS
#: What each of :data:`GROUPS` holds, in the words of the report's list of absent groups.
GROUP_DESCRIPTIONS = {
    "accounting": "privacy accounting (exact ε(δ) and conversions)",
    "epl": "empirical privacy loss",
    "residuals": "noise residuals (DP − truth)",
    "accuracy": "accuracy of counts under the Bureau's and the reduced noise",
    "mpl": "maximum privacy loss lower bounds (not run)",
}


#: a store the report reads: one the caller opened, or a local path or fsspec URI
StoreLike = ResultStore | str | os.PathLike[str]


def store_arg(store: StoreLike, storage_options: Mapping[str, Any] | None = None) -> ResultStore:
    """The store the report reads through: ``store`` itself if the caller opened it (the CLI),
    else the path or URI as given (read in this process: no normalising), with
    ``storage_options`` for fsspec."""
    if isinstance(store, ResultStore):
        return store
    url = os.fspath(store)
    options = dict(storage_options) if storage_options else None
    return ResultStore(url=url, storage_options=options, given=url)


def open_group(store: ResultStore, group: str) -> xr.Dataset | None:
    """Open one group lazily (no dask), or ``None`` if the store does not hold it."""
    try:
        return store.dataset(group)
    except (KeyError, FileNotFoundError, zarr.errors.NodeNotFoundError):
        return None


def read_root_attrs(store: ResultStore) -> dict[str, Any] | None:
    """The root attributes of ``store``, or ``None`` if it is no Zarr group."""
    kwargs: dict[str, Any] = {"mode": "r"}
    if store.storage_options:
        kwargs["storage_options"] = store.storage_options
    try:
        root = zarr.open_group(store.url, **kwargs)
    except (KeyError, FileNotFoundError, zarr.errors.NodeNotFoundError):
        return None
    return dict(root.attrs)


def open_store(
    store: StoreLike, storage_options: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any] | None, dict[str, xr.Dataset | None]]:
    """The root attributes and every group the report reads (:data:`GROUPS`, ``summary``,
    :data:`CLAIMS_GROUP`, :data:`COVERAGE_GROUP` and :data:`FDP_COVERAGE_GROUP`; ``None`` where
    absent) of ``store`` (:func:`store_arg`).

    Raises :class:`FileNotFoundError` if ``store`` holds neither root attributes nor any group.
    """
    rs = store_arg(store, storage_options)
    if not rs.storage_options:
        rs.check_documents()  # before zarr reads any metadata document
    root_attrs = read_root_attrs(rs)
    groups = {
        g: open_group(rs, g)
        for g in (*GROUPS, "summary", CLAIMS_GROUP, COVERAGE_GROUP, FDP_COVERAGE_GROUP)
    }
    if root_attrs is None and all(ds is None for ds in groups.values()):
        raise FileNotFoundError(f"no dpaudit result store at {rs.shown!r}")
    return root_attrs, groups


def str_values(values: Any) -> list[str]:
    """Coordinate or string variable values as plain ``str`` (object / StringDType / bytes)."""
    out = []
    for v in np.asarray(values).ravel().tolist():
        out.append(v.decode() if isinstance(v, bytes) else str(v))
    return out


def attr_str(attrs: Mapping[str, Any], key: str, default: str = "—") -> str:
    v = attrs.get(key)
    if v is None or (isinstance(v, str) and not v.strip()):
        return default
    return str(v)


def var_values(ds: xr.Dataset | None, name: str) -> np.ndarray | None:
    """The values of variable ``name`` of ``ds`` as stored, or ``None`` if absent."""
    if ds is None or name not in ds.variables:
        return None
    return np.asarray(ds[name].values)


def float_values(ds: xr.Dataset, name: str) -> np.ndarray | None:
    """The values of variable ``name`` of ``ds`` as float64, or ``None`` if absent."""
    return np.asarray(ds[name].values, dtype=np.float64) if name in ds.variables else None


#: The headline δ of a store written before ``accounting.headline_delta`` was stored: the stored δ
#: closest to the Bureau's 1e-10.
BUREAU_DELTA = 1e-10


def headline_delta(acc: xr.Dataset | None) -> tuple[int, float] | None:
    """(index, value) of the headline δ among the ``accounting`` group's δ: its ``headline_delta``
    attribute (the spec's ``accounting.headline_delta``), or for older stores the δ closest to
    :data:`BUREAU_DELTA` (on a log scale). ``None`` without a group or δ."""
    if acc is None or "delta" not in acc.coords:
        return None
    deltas = [float(d) for d in np.asarray(acc["delta"].values, dtype=np.float64)]
    if not deltas:
        return None
    want = acc.attrs.get("headline_delta")
    try:
        target = float(want) if want is not None else BUREAU_DELTA
    except (TypeError, ValueError):
        target = BUREAU_DELTA
    if not (math.isfinite(target) and target > 0):
        target = BUREAU_DELTA
    logs = [abs(math.log10(d) - math.log10(target)) if d > 0 else math.inf for d in deltas]
    j = int(np.argmin(logs))
    return j, deltas[j]


def nation_and_states(ds: xr.Dataset | None) -> tuple[list[str], list[str]]:
    """The ``state`` coordinate of a group split into (the nation, the states): the nation is
    the entry named like a geolevel (the national level, ``US``, held as a state-equivalent that
    has data at that level only)."""
    if ds is None or "state" not in ds.coords:
        return [], []
    labels = str_values(ds["state"].values)
    levels = set(str_values(ds["geolevel"].values)) if "geolevel" in ds.coords else set()
    return [s for s in labels if s in levels], [s for s in labels if s not in levels]


def parse_spec_toml(text: Any) -> dict[str, Any]:
    """A store's ``spec_toml`` attribute as a mapping; ``{}`` when it is absent, not text, or not
    TOML."""
    if not isinstance(text, str):
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def replicates(attrs: Mapping[str, Any], res: xr.Dataset | None) -> int | None:
    """The replicates of the run: the spec's ``audit.replicates``, else the ``replicate``
    dimension of the residuals group, else ``None``; an observed release: its published runs."""
    runs = attrs.get("published_runs")
    if isinstance(runs, int) and not isinstance(runs, bool) and runs > 0:
        return runs
    r = parse_spec_toml(attrs.get("spec_toml")).get("audit", {}).get("replicates")
    if isinstance(r, int) and not isinstance(r, bool) and r > 0:
        return r
    if res is not None and res.sizes.get("replicate", 0) > 0:
        return int(res.sizes["replicate"])
    return None


def epl_interval_label(epl: Any) -> tuple[str, str, str]:
    """(interval, floor quantile, bias-aware description) of an ``epl`` group, from the knobs it
    was computed with (stores written before the knobs were stored: 90 % basic, 95 %)."""
    attrs = getattr(epl, "attrs", None) or {}
    try:
        knobs = json.loads(attrs.get("bias_aware_settings", "{}"))
    except (TypeError, ValueError):
        knobs = {}
    conf = float(knobs.get("confidence", 0.9))
    kind = str(knobs.get("ci_kind", "basic"))
    null_q = float(knobs.get("null_quantile", 0.95))
    describe = str(attrs.get("bias_aware", "bandwidth 0.3 sd, integer window")).split(";")[0]
    return (
        f"{100 * conf:g} % {kind}",
        f"{100 * null_q:g} %",
        describe.removeprefix("epl_bias_aware: "),
    )


def spec_name(spec_toml: Any) -> str:
    """The spec's ``audit.name`` (shown as text; the template escapes it)."""
    name = parse_spec_toml(spec_toml).get("audit", {}).get("name")
    return str(name) if name else "—"


@dataclass
class Provenance:
    software: list[tuple[str, str]]
    software_raw: str | None
    spec_toml: str | None
    attrs: list[tuple[str, str]] = field(default_factory=list)


def provenance(attrs: Mapping[str, Any]) -> Provenance:
    """The software versions, the spec and the other run attributes, for the last section."""
    software: list[tuple[str, str]] = []
    raw: str | None = None
    sw = attrs.get("software")
    if isinstance(sw, Mapping):
        software = sorted((str(k), str(v)) for k, v in sw.items())
    elif isinstance(sw, str) and sw.strip():
        try:
            parsed = json.loads(sw)
        except json.JSONDecodeError:
            raw = sw
        else:
            if isinstance(parsed, Mapping):
                software = sorted((str(k), str(v)) for k, v in parsed.items())
            else:
                raw = sw
    spec = attrs.get("spec_toml")
    # the spec and the software have their own tables; the allocation's source heads the report
    known = {"spec_toml", "software", "allocation_source"}
    extra = [(str(k), str(v)) for k, v in sorted(attrs.items()) if k not in known]
    return Provenance(
        software=software,
        software_raw=raw,
        spec_toml=str(spec) if spec is not None and str(spec).strip() else None,
        attrs=extra,
    )
