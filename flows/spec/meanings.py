"""What each spec key means, in words: the comments of the shipped ``default_spec.toml`` and, for
keys it leaves uncommented, :data:`MEANINGS`. The spec reference (``flows.cli.docgen``) prints them;
the sections' JSON schema carries them as descriptions (:func:`describe_schema`), so a form built
from that schema (the Prefect UI's run form of a ``dpaudit serve`` deployment) shows them too."""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files
from typing import Any


@cache
def toml_comments() -> dict[tuple[str, str], str]:
    """``(section, key) -> comment`` from the default spec: trailing comments and continuations."""
    text = files("flows.spec").joinpath("default_spec.toml").read_text(encoding="utf-8")
    out: dict[tuple[str, str], str] = {}
    section: str = ""
    last: str | None = None
    pending: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if m := re.match(r"^\[(\w+)\]", stripped):
            section, last, pending = m.group(1), None, []
        elif m := re.match(r"^(\w+)\s*=\s*(.*)$", stripped):
            key, rest = m.group(1), m.group(2)
            parts = [*pending]
            if "#" in rest and not rest.lstrip().startswith('"#'):
                parts.append(rest.split("#", 1)[1].strip())
            out[section, key] = " ".join(p for p in parts if p)
            last, pending = key, []
        elif stripped.startswith("#"):
            comment = stripped.lstrip("#").strip()
            if re.match(r"^\w+\s*=", comment):  # a commented-out example key: its text is its own
                pending = []
            elif line.startswith(" ") and last is not None:
                out[section, last] = f"{out[section, last]} {comment}".strip()
            elif section:
                pending.append(comment)
    return out


#: explanations of keys the default spec leaves uncommented
MEANINGS: dict[tuple[str, str], str] = {
    ("audit", "name"): "a label for the run, shown in the report (as text, escaped)",
    ("population", "seed"): "seed of the synthetic population; unset: derived from audit.seed",
    ("population", "people"): "flaxman only: N people, uniform over the tree's leaves",
    (
        "population",
        "levels",
    ): "flaxman: J levels of the regular tree; table: the hierarchy columns, "
    'top to bottom (e.g. ["state"])',
    ("population", "path"): "table only: the CSV or Parquet file of counts (relative: to the spec "
    "file's directory; for a spec given as data, to the working directory)",
    ("population", "counts"): "table only: the count columns (a row's total is their sum)",
    ("release", "epsilon_strata"): "sa3 only: ε₂ of each row's counts (the strata); unset: epsilon",
    ("population", "unit"): "table only: the column labelling the rows (unset: the row number)",
    ("population", "mean_per_location"): "flaxman only: mean people per leaf location",
    ("accounting", "deltas"): "δ values of the ε(δ) table; the smallest is δ* of the reduced noise "
    "(Su, Su & Wang Table 1 uses 1e-11)",
    ("accounting", "eps_grid_points"): "points of the ε grid of the stored δ(ε) curves",
    ("accounting", "cache"): "reuse stored exact accounting results (false: always recompute); "
    "where they live and how they are invalidated: docs/accounting.md",
    ("output", "store"): "the Zarr result store written by the run",
    ("output", "report"): "the HTML report written at the end of the run",
    ("cluster", "n_workers"): "local cluster only: Dask worker processes",
    ("cluster", "class"): "a Dask cluster class by import path, started before the flow (e.g. "
    '"dask_jobqueue.SLURMCluster"; see docs/deploy.md); unset: scheduler or a local cluster',
    ("cluster", "kwargs"): "keyword arguments of cluster.class",
    ("cluster", "adapt"): "adaptive scaling of a local or class cluster: { minimum, maximum }",
    ("cluster", "threads_per_worker"): "local cluster only: threads per worker",
    ("cluster", "memory_limit"): "local cluster only: memory per worker",
    ("cluster", "timeout_s"): "seconds before the flow run times out",
    # the bias-aware estimate (epl_bias_aware, its interval and floor) and the EPL(x) surfaces;
    # the shipped spec leaves them at the library's defaults (auditlib.epl.settings.DEFAULTS)
    ("epl", "bias_aware_bandwidth"): "bias-aware estimate: kind factor: h = value * sd (unset: "
    "0.3); kind absolute: h in residual units (required); unset for scott / silverman",
    ("epl", "bandwidth_kind"): "bias-aware estimate: factor | absolute | scott (sd * n^-1/5) | "
    "silverman (sd * (3n/4)^-1/5)",
    ("epl", "bias_aware_percentiles"): "percentiles of the bias-aware window; "
    '"percentiles": the same as percentiles',
    ("epl", "shift"): "neighbour shift: EPL(x) = log p(x)/p(x + shift)",
    ("epl", "n_boot"): "bootstrap resamples (multinomial on the lattice counts), keyed from "
    "audit.seed per geolevel, state and query",
    ("epl", "confidence"): "level of the interval and of the surfaces' pointwise bands",
    ("epl", "ci_kind"): "basic (2 EPL - quantiles: removes the max's upward bias) | percentile",
    ("epl", "n_null"): "draws of the matched discrete-Gaussian reference (the floor), keyed from "
    "audit.seed",
    ("epl", "null_quantile"): "quantile of the reference stored as epl_null_upper",
}


def meaning(section: str, key: str) -> str:
    """The words of ``[section] key`` ("" if none)."""
    return toml_comments().get((section, key)) or MEANINGS.get((section, key), "")


def describe_schema(schema: dict[str, Any], cls: type) -> None:
    """pydantic ``json_schema_extra`` of a spec section (``AuditSection`` -> ``[audit]``): each
    property gets its key's meaning as ``description``, the section its class comment."""
    name = cls.__name__
    if not name.endswith("Section"):
        return
    section = name.removesuffix("Section").lower()
    for key, prop in schema.get("properties", {}).items():
        words = meaning(section, key)
        if words and isinstance(prop, dict) and "description" not in prop:
            prop["description"] = words
