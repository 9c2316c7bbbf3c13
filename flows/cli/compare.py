"""``dpaudit compare STORE_A STORE_B``: what changed between two audits — per geolevel the Bureau's
and the exact ε at the headline δ, the bias-aware EPL and the MPL bound of each store, B − A and
B / A, and whether each change is beyond its interval — as a table that fits 80 columns, CSV or
JSON (:mod:`flows.report.compare`).

Both stores must be completed audit stores (``dpaudit run``) whose checksums match; anything else
is bad input (exit 2, one line naming the store and the fix).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from auditlib.exceptions import DPAuditError, StoreError
from flows.cli.checks import check_output_file, check_store_exists
from flows.cli.errors import fail
from flows.cli.options import OutputFileOption, OverwriteFileOption

if TYPE_CHECKING:
    from storage.result_store import ResultStore


class CompareFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def check_audit_store(store: ResultStore, role: str) -> None:
    """A store a comparison reads: an existing, completed dpaudit store whose arrays match their
    checksums (``role`` names it in the message: "store A", "--compare store")."""
    url = store.shown
    check_store_exists(store)
    if not store.is_dpaudit_store():
        raise StoreError(
            f"{role} {url!r} is a Zarr store that dpaudit did not write; give a store written by "
            "dpaudit run"
        )
    if not store.is_complete():
        raise StoreError(
            f"{role} {url!r} is not a completed dpaudit store (a run is still writing it, or it "
            "stopped before the end); wait for the run to finish, or run it again, then compare"
        )
    store.check()


def check_audit_kinds(stores: list[tuple[str, ResultStore]]) -> None:
    """Every (role, store) of ``stores`` holds an audit (``dpaudit run``), not another command's
    results (mpl-coverage, direct, sweep), which a comparison of audits cannot line up."""
    from flows.report.compare_data import store_kind

    kinds = [(role, s.shown, *store_kind(s.groups())) for role, s in stores]
    for role, url, kind, command in kinds:
        if kind != "audit":
            others = "; ".join(f"{r} {u!r} is an {k} store" for r, u, k, _ in kinds if u != url)
            what = f"an {kind} store ({command})" if command else "no audit store"
            raise StoreError(
                f"{role} {url!r} is {what}{'; ' + others if others else ''}: dpaudit compare "
                "compares two audit stores; give two stores written by dpaudit run"
            )


def compare(
    store_a: Annotated[str, typer.Argument(metavar="STORE_A", help="The earlier audit's store.")],
    store_b: Annotated[str, typer.Argument(metavar="STORE_B", help="The later audit's store.")],
    fmt: Annotated[
        CompareFormat, typer.Option("--format", "-f", help="table, csv or json.")
    ] = CompareFormat.table,
    output: OutputFileOption = None,
    overwrite: OverwriteFileOption = False,
) -> None:
    """Show what changed between two audits, per geolevel: ε, EPL, MPL, B − A and B / A.

    Per geolevel: the Bureau's and the exact ε at the headline δ, the bias-aware EPL and the MPL
    lower bound of each store, their difference B − A and ratio B / A. A change is 'within noise' when the two EPL (or MPL) intervals overlap, 'changed' when they do
    not; an exact ε 'changed' when the certified brackets do not overlap. The spec keys that
    differ (output and cluster aside) and the levels only one store holds are listed first. The
    ε are compared at store A's headline δ (accounting.headline_delta), which store B must hold
    too. CSV: one line per level and measure, then the EPL of every query both stores estimated,
    every digit; JSON: the same with the spec differences and notes."""
    from flows.report.compare import compare as line_up
    from flows.report.compare_data import audit_numbers
    from flows.report.compare_text import csv_text, json_dict, table_text
    from storage.result_store import ResultStore

    try:
        if output is not None:  # the output first, as every command checks it before reading
            check_output_file(output, overwrite, "output", create=False)
        a, b = ResultStore.at(store_a), ResultStore.at(store_b)
        check_audit_store(a, "store A")
        check_audit_store(b, "store B")
        check_audit_kinds([("store A", a), ("store B", b)])
        result = line_up(audit_numbers(a), audit_numbers(b))
    except DPAuditError as exc:
        fail(str(exc))
    if fmt is CompareFormat.json:
        text = json.dumps(json_dict(result), indent=2, ensure_ascii=False) + "\n"
    elif fmt is CompareFormat.csv:
        text = csv_text(result)
    else:
        text = table_text(result)
    if output is None:
        typer.echo(text, nl=False)
        return
    from flows.cli.tradeoff import write_atomically

    write_atomically(output, text)
    typer.echo(f"{fmt.value}: {output}", err=True)
