"""The report's header: what the store is, in a definition list. An audit store names its
allocation, release and run (:func:`audit_header`); a store of ``dpaudit mpl-coverage`` or
``fdp-coverage`` holds no audit, so its header (:func:`coverage_meta`) names what it does hold —
the experiment, its mechanisms and claims, repetitions, draws, confidence, seed and run — and
leaves out whatever the store does not record, never showing an empty field."""

from __future__ import annotations

from typing import Any

from flows.report.accounting import NEIGHBOURS
from flows.report.format import fmt_delta, fmt_duration, fmt_num
from flows.report.release import release_line
from flows.report.release_basis import ReleaseBasis
from flows.report.store_data import attr_str, spec_name


def source_line(attrs: dict[str, Any]) -> str:
    """The commit the run started on, and any other commit whose code resumed it."""
    first = attr_str(attrs, "source_commit")
    later = [str(c) for c in attrs.get("resumed_commits") or []]
    return f"{first} (resumed on {', '.join(later)})" if later else first


def audit_header(
    attrs: dict[str, Any],
    acc: Any,
    n_rep: int | None,
    hd: tuple[Any, Any] | None,
    basis: ReleaseBasis | None = None,
) -> dict[str, Any]:
    """The header fields of an audit store (root and summary attributes, the accounting group);
    a published release (``basis``) counts its published runs, not replicates."""
    basis = basis or ReleaseBasis("")
    neighbours_raw = attr_str(attrs, "neighbours", "")
    if not neighbours_raw and acc is not None:
        neighbours_raw = attr_str(acc.attrs, "neighbours", "")
    allocation, run_id = attr_str(attrs, "allocation_id"), attr_str(attrs, "run_id")
    return {
        "title": f"{allocation} — {run_id}",
        "name": spec_name(attrs.get("spec_toml")),
        "source_commit": source_line(attrs),
        "allocation_id": allocation,
        "allocation_source": attr_str(attrs, "allocation_source"),
        "release": release_line(attrs),
        "release_short": release_line(attrs, words=False),
        "neighbours": NEIGHBOURS.get(neighbours_raw, neighbours_raw or "—"),
        "run_id": run_id,
        "created_utc": attr_str(attrs, "created_utc"),
        "seed": attr_str(attrs, "seed"),
        "n_workers": attr_str(attrs, "n_workers"),
        "dask_scheduler": attr_str(attrs, "dask_scheduler"),
        "wall_time": fmt_duration(attrs.get("wall_time_s")),
        "replicates": str(n_rep) if n_rep else "—",
        "replicates_label": "Replicates" if basis.simulated else "Published runs",
        "runs": basis.runs(n_rep) if n_rep else "—",
        "headline_delta": fmt_delta(hd[1]) if hd is not None else None,
        "dpaudit_version": attr_str(attrs, "dpaudit_version"),
        "meta": None,  # the audit's own definition list (the template's)
    }


def coverage_header(
    attrs: dict[str, Any], coverage: Any, fdp: Any, store_name: str
) -> dict[str, Any]:
    """The header fields of a coverage-only store: its experiment as the subtitle and title, and
    :func:`coverage_meta` as the definition list."""
    kind = "mpl-coverage" if coverage is not None else "fdp-coverage"
    run_id = _text(attrs.get("run_id"))
    return {
        "title": f"{kind}" + (f" — {run_id}" if run_id else ""),
        "experiment": kind,
        "meta": coverage_meta(attrs, coverage, fdp, store_name),
        "headline_delta": None,
        "dpaudit_version": attr_str(attrs, "dpaudit_version"),
    }


def coverage_meta(
    attrs: dict[str, Any], coverage: Any, fdp: Any, store_name: str
) -> list[tuple[str, str]]:
    """(term, value) of what a coverage store records, each with a value: the experiment, per
    group its mechanisms, claims, repetitions, draws, confidence and seed, then the run (id,
    creation, workers, wall time, dpaudit version) and the store."""
    rows: list[tuple[str, str]] = []
    if coverage is not None:
        a = coverage.attrs
        rows.append(("Experiment", "dpaudit mpl-coverage: the MPL lower bound on known losses"))
        rows.append(("Mechanisms", _names(coverage, "mechanism")))
        rows.append(("Claimed ε₀", _numbers(coverage, "epsilon0")))
        rows.append(("Repetitions", _size(coverage, "rep", "per mechanism and ε₀")))
        if a.get("n") is not None and a.get("n_confidence") is not None:
            rows.append(
                ("Draws", f"{int(a['n']):,} per input, then {int(a['n_confidence']):,} fresh")
            )
        if a.get("alpha") is not None:
            alpha = float(a["alpha"])
            rows.append(("α", f"{fmt_num(alpha)} (confidence {fmt_num(1 - alpha)})"))
        rows.append(("Seed", _text(a.get("seed"))))
    if fdp is not None:
        a = fdp.attrs
        rows.append(("Experiment", "dpaudit fdp-coverage: the empirical f-DP points"))
        rows.append(("Mechanisms", _names(fdp, "mechanism")))
        rows.append(("Claimed μ or ε", _numbers(fdp, "parameter")))
        rows.append(("Confidence bands", _names(fdp, "band")))
        rows.append(("Repetitions", _size(fdp, "rep", "per mechanism and claim")))
        if a.get("n_select") is not None and a.get("n") is not None:
            rows.append(
                (
                    "Draws",
                    f"{int(a['n_select']):,} per input to select tests, {int(a['n']):,} fresh "
                    "to certify",
                )
            )
        if a.get("conf") is not None:
            rows.append(("Confidence", fmt_num(float(a["conf"]))))
        rows.append(("Seed", _text(a.get("seed"))))
    rows.append(("Run id", _text(attrs.get("run_id"))))
    rows.append(("Created (UTC)", _text(attrs.get("created_utc"))))
    workers, where = _text(attrs.get("n_workers")), _text(attrs.get("dask_scheduler"))
    rows.append(("Workers", f"{workers} ({where})" if workers and where else workers))
    if attrs.get("wall_time_s") is not None:
        rows.append(("Flow wall time", fmt_duration(attrs.get("wall_time_s"))))
    rows.append(("dpaudit", _text(attrs.get("dpaudit_version"))))
    rows.append(("Store", store_name))
    return [(term, value) for term, value in rows if value and value != "—"]


def _text(v: Any) -> str:
    return "" if v is None else str(v).strip()


def _names(ds: Any, coord: str) -> str:
    return ", ".join(str(v) for v in ds[coord].values) if coord in ds.coords else ""


def _numbers(ds: Any, coord: str) -> str:
    return ", ".join(fmt_num(float(v)) for v in ds[coord].values) if coord in ds.coords else ""


def _size(ds: Any, dim: str, per: str) -> str:
    return f"{int(ds.sizes[dim]):,} {per}" if dim in ds.sizes else ""
