"""What a finished ``dpaudit run`` prints: its blocks and times, the headline table of each
level's ρ and ε (the report's first screen) with the claims' verdicts, and where it wrote its store
and report; every line within 80 columns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from collections.abc import Mapping

    from storage.result_store import ResultStore


def print_run_summary(
    store: ResultStore, report: str | None, summary: dict[str, Any], wall: float
) -> None:
    """Blocks, wall time and the ε (or EPL) table of a finished run, then where it was written."""
    from flows.cli.published import has_error_bars, print_error_bars_summary
    from storage import schema as S

    url = store.shown
    if has_error_bars(store):  # a published table's error bars: their widths and CSV
        return print_error_bars_summary(store, report, summary, wall)
    groups = store.groups()
    if S.ACCOUNTING not in groups:
        epl = store.open_group(S.EPL)
        typer.echo(f"run {summary['run_id']}: {summary['blocks']} blocks")
        typer.echo(f"time:   {wall:.1f} s in all{_flow_time(store)}")
        # the report's headline EPL: the bias-aware one (older stores: Flaxman–Petti's)
        name = "epl_bias_aware" if "epl_bias_aware" in epl else "epl_pooled"
        for g in epl.geolevel.values:
            typer.echo(f"{g!s:<8} EPL {float(epl[name].sel(geolevel=g).max()):.4f}")
        typer.echo(f"store:  {url}")
        if report:
            typer.echo(f"report: {report}")
        return
    acc = store.open_group(S.ACCOUNTING)
    claims = None
    if S.CLAIMS in groups:
        from flows.report.claims import read_claims

        claims = read_claims(store.open_group(S.CLAIMS))
    resumed = summary.get("resumed_blocks", 0)
    typer.echo(
        f"run {summary['run_id']}: {summary['blocks']} blocks"
        f"{f' ({resumed} resumed)' if resumed else ''}, "
        f"{summary['residuals']:,} residuals"
    )
    typer.echo(f"time:   {wall:.1f} s in all{_flow_time(store)}")
    print_headline_table(acc, claims, store.root_attrs())
    typer.echo(f"store:  {url}")
    if report:
        typer.echo(f"report: {report}")


def _flow_time(store: ResultStore) -> str:
    """The flow's own wall time as the store records it (the report's header), beside the
    command's: the difference is the cluster's start and the report."""
    try:
        flow = float(store.root_attrs().get("wall_time_s", "nan"))
    except (TypeError, ValueError, KeyError, FileNotFoundError, AttributeError):
        return ""
    if flow != flow:  # not recorded
        return ""
    return f", {flow:.1f} s in the flow (the report's figure)"


def print_headline_table(
    acc: Any, claims: Any = None, attrs: Mapping[str, Any] | None = None
) -> None:
    """Per level and all levels composed, ρ, the Bureau's and the exact ε at the headline δ —
    the numbers of the report's first screen — and, when the store holds them (``claims``: a
    :class:`flows.report.claims.Claims`), each level's claim verdict, then the claim in words;
    every line within 80 columns. ``attrs``: the store's root attributes, whose spec says which
    levels it left unsimulated."""
    from flows.report.format import fmt_bracket, fmt_delta, fmt_num
    from flows.report.store_data import headline_delta

    hd = headline_delta(acc)
    if hd is None:
        return
    j, d = hd
    verdict_col = "  claim" if claims is not None else ""
    typer.echo(
        f"{'geolevel':<20} {'rho':>8} {'Bureau eps':>11} {'exact eps':>11}{verdict_col}  "
        f"(delta={fmt_delta(d)})"
    )
    rows = [
        (
            str(g),
            float(acc.rho.values[i]),
            float(acc.eps_bureau.values[i, j]),
            fmt_bracket(acc.eps_exact_lower.values[i, j], acc.eps_exact_upper.values[i, j]),
        )
        for i, g in enumerate(acc.geolevel.values)
    ]
    if "composed_eps_bureau" in acc:
        rows.append(
            (
                "all levels composed",
                float(acc.composed_rho.values),
                float(acc.composed_eps_bureau.values[j]),
                fmt_bracket(
                    acc.composed_eps_exact_lower.values[j], acc.composed_eps_exact_upper.values[j]
                ),
            )
        )
    na = str(acc.attrs.get("bureau_na") or "")  # pure eps-DP noise: no zCDP conversion
    for g, rho, bureau, exact in rows:
        bu = "n/a" if na and bureau != bureau else fmt_num(bureau, 5)
        verdict = ""
        if claims is not None and g in claims.levels:
            verdict = f"  {claims.verdict(g)}"
        typer.echo(f"{g:<20} {rho:8.4f} {bu:>11} {exact:>11}{verdict}")
    if "composed_eps_bureau" in acc:
        _composed_note(acc, attrs or {})
    if na:
        import textwrap

        for line in textwrap.wrap(f"Bureau eps {na}", 80, subsequent_indent="    "):
            typer.echo(line)
    if claims is not None:
        from flows.report.claims import text_lines

        for line in text_lines(claims, 80):
            typer.echo(line)


def _composed_note(acc: Any, attrs: Mapping[str, Any]) -> None:
    """Under the table, what its composed row composes when that is more than its rows (levels
    the spec left unsimulated): the report's words, within 80 columns."""
    import math
    import textwrap

    import numpy as np

    from flows.report.accounting import composed_words, unsimulated_levels

    rho, composed = acc.rho.values, float(acc.composed_rho.values)
    if math.isclose(float(np.nansum(rho)), composed, rel_tol=1e-6):
        return
    levels = [str(g) for g in acc.geolevel.values]
    words = composed_words(levels, rho, composed, unsimulated_levels(attrs))
    for line in textwrap.wrap(f"all levels composed: {words}", 80, subsequent_indent="    "):
        typer.echo(line)
