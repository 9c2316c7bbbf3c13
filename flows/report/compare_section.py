"""The report's section "Compared with": the report's store set beside another audit's store
(``dpaudit report STORE --compare OTHER``), the numbers of :func:`flows.report.compare.compare` with
OTHER as A (the baseline) and this store as B, so differences read "this − other"; the ε at this
store's headline δ."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Any

from flows.report.compare import MEASURES, ClaimRow, Comparison, compare
from flows.report.compare_data import AuditNumbers, audit_numbers
from flows.report.compare_text import diff_text, legend, ratio_text, value_text, verdict
from flows.report.format import fmt_delta
from flows.report.store_data import StoreLike

#: the statuses that name a side, in the report's words (A: the other store, B: this one)
SIDES = {"only in A": "only in the other store", "only in B": "only in this store"}
STATUS_CLASS = {"changed": "warn", "same": "ok", "within noise": "ok", "within bracket": "ok"}


@dataclass
class CompareSection:
    other_name: str
    other_path: str
    other_run_id: str
    delta: str | None
    notes: list[str]
    spec_differences: list[tuple[str, str, str]]
    only_here: list[str]
    only_there: list[str]
    rows: list[dict[str, str]]
    query_rows: list[dict[str, str]]
    legend: str
    verdict: str


def _cells(row: Any) -> dict[str, str]:
    return {
        "geolevel": row.geolevel,
        "query": row.query,
        "measure": MEASURES[row.measure],
        "other": value_text(row.measure, row.a),
        "this": value_text(row.measure, row.b),
        "diff": diff_text(row.diff),
        "ratio": ratio_text(row.ratio),
        "status": SIDES.get(row.status, row.status),
        "status_class": STATUS_CLASS.get(row.status, ""),
    }


def _claim_cells(row: ClaimRow) -> dict[str, str]:
    return {
        "geolevel": row.geolevel,
        "query": "",
        "measure": "Claim",
        "other": row.a,
        "this": row.b,
        "diff": "",
        "ratio": "",
        "status": SIDES.get(row.status, row.status),
        "status_class": STATUS_CLASS.get(row.status, ""),
    }


def _rows_with_claims(c: Comparison) -> list[dict[str, str]]:
    """The rows of each level, its claim verdicts last."""
    claims = {r.geolevel: r for r in c.claim_rows}
    out: list[dict[str, str]] = []
    for i, row in enumerate(c.rows):
        out.append(_cells(row))
        last = i + 1 == len(c.rows) or c.rows[i + 1].geolevel != row.geolevel
        if last and row.geolevel in claims:
            out.append(_claim_cells(claims.pop(row.geolevel)))
    return out + [_claim_cells(r) for r in claims.values()]


def section_of(c: Comparison) -> CompareSection:
    shown = [r for r in c.query_rows if r.status not in ("same", "within noise")]
    return CompareSection(
        other_name=pathlib.PurePosixPath(c.a_path.rstrip("/")).name or c.a_path,
        other_path=c.a_path,
        other_run_id=c.a_run_id,
        delta=fmt_delta(c.delta) if c.delta is not None else None,
        notes=c.notes,
        spec_differences=c.spec_differences,
        only_here=c.only_in_b,
        only_there=c.only_in_a,
        rows=_rows_with_claims(c),
        query_rows=[_cells(r) for r in shown],
        legend=legend(c),
        verdict=verdict(c),
    )


def compare_section(
    this: AuditNumbers,
    other: StoreLike,
    storage_options: dict[str, Any] | None = None,
) -> CompareSection:
    """This store (already read) beside the store ``other``: other = A, this = B, δ of this."""
    there = audit_numbers(other, storage_options)
    return section_of(compare(there, this, delta_of="b", labels=("the other store", "this store")))
