"""The ``dpaudit`` command line.

Bad input (a malformed spec, an unknown allocation or geolevel, δ outside (0, 1), an existing store, an
unreachable cluster) exits with code 2 and one line on stderr, before anything is written. A run that
fails while computing exits with code 1 and leaves no store behind.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from auditlib import __version__
from auditlib.exceptions import DPAuditError, InvalidParameterError
from flows.runtime import apply_prefect_defaults

app = typer.Typer(
    name="dpaudit",
    help="Audit the privacy of differentially private statistical releases (2020 US Census).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1


class Neighbours(StrEnum):
    add_remove = "add_remove"
    bounded = "bounded"


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    typer.echo(f"dpaudit: error: {message}", err=True)
    raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dpaudit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = None,
) -> None:
    """dpaudit: exact accounting, empirical privacy loss and simulation of DP releases."""


@app.command()
def spec(
    path: Annotated[Path | None, typer.Argument(help="A spec to validate and print.")] = None,
) -> None:
    """Print the default audit spec (or validate SPEC and print it normalized)."""
    from flows.spec import default_spec_text, load_spec

    if path is None:
        typer.echo(default_spec_text())
        return
    try:
        typer.echo(load_spec(path).to_toml())
    except DPAuditError as exc:
        fail(str(exc))


@app.command()
def run(
    spec_path: Annotated[
        Path | None,
        typer.Argument(metavar="SPEC", help="Audit spec (TOML); default: shipped spec."),
    ] = None,
    store_url: Annotated[
        str | None, typer.Option("--store", help="Output store (overrides output.store).")
    ] = None,
    report: Annotated[
        str | None, typer.Option("--report", help="Report path (overrides output.report).")
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option("--scheduler", help="Dask scheduler address (overrides cluster.scheduler)."),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing store and report.")
    ] = False,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip the HTML report.")] = False,
) -> None:
    """Run an audit: simulate releases on Dask, estimate EPL, account exactly, write store + report."""
    apply_prefect_defaults()
    from flows.spec import load_spec, parse_spec
    from storage import store

    try:
        s = load_spec(spec_path)
        data = s.model_dump(mode="json")
        if store_url is not None:
            data["output"]["store"] = store_url
        if report is not None:
            data["output"]["report"] = report
        if scheduler is not None:
            data["cluster"]["scheduler"] = scheduler
        if overwrite:
            data["output"]["overwrite"] = True
        s = parse_spec(data, "spec with command-line overrides")
        url = s.output.store
        store.check_target(url, s.output.overwrite)
        if not no_report:
            _check_report_target(s.output.report, s.output.overwrite)
        if s.cluster.scheduler:
            from flows.runtime import check_reachable

            check_reachable(
                s.cluster.scheduler,
                "Dask scheduler",
                'start one (`dask scheduler`) or set cluster.scheduler = "" for a local cluster',
            )
    except DPAuditError as exc:
        fail(str(exc))
    _run_audit(s, url, no_report)


def _check_report_target(path: str, overwrite: bool) -> None:
    from auditlib.exceptions import StoreError

    p = Path(path)
    if p.exists() and not overwrite:
        raise StoreError(
            f"report {str(p)!r} already exists; pass --overwrite or choose another output.report"
        )
    if p.exists() and p.is_dir():
        raise StoreError(f"report path {str(p)!r} is a directory; give a file name")


def _run_audit(s: Any, url: str, no_report: bool) -> None:
    import logging

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from flows import audit
    from flows import progress as progress_events
    from flows.runtime import ClusterUnreachableError, prefect_api, task_runner
    from storage import store

    logging.getLogger("distributed").setLevel(logging.WARNING)  # keep the terminal for the bar
    console = Console(stderr=True)
    run_id = audit.run_id_for(s)
    staging = store.staging_path(url, run_id)
    store.discard(staging, url)  # leftovers of an interrupted run with the same spec
    t0 = time.perf_counter()
    try:
        with (
            prefect_api() as api_url,
            Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            ) as progress,
        ):
            bar = progress.add_task("starting cluster", total=None)

            def hook(done: int, total: int, what: str) -> None:
                progress.update(bar, completed=done, total=total, description=what)

            progress_events.listen(hook)
            runner = task_runner(
                s.cluster.scheduler,
                s.cluster.n_workers,
                s.cluster.threads_per_worker,
                s.cluster.memory_limit,
            )
            flow = audit.audit_flow.with_options(
                task_runner=runner, timeout_seconds=s.cluster.timeout_s
            )
            state = flow(s, staging, run_id, return_state=True)
            summary = state.result()
            summary["flow_run_id"] = str(state.state_details.flow_run_id)
            embedded = os.environ.get("DPAUDIT_EMBEDDED_API") == api_url
        store.set_root_attrs(
            staging,
            {
                "dask_scheduler": s.cluster.scheduler or "LocalCluster",
                "n_workers": 0 if s.cluster.scheduler else s.cluster.n_workers,
                "prefect_api": "embedded" if embedded else api_url,
                "prefect_flow_run_id": summary["flow_run_id"],
            },
        )
        store.finalize(staging)
        store.publish(staging, url)
    except ClusterUnreachableError as exc:
        store.discard(staging, url)
        fail(str(exc))
    except KeyboardInterrupt:
        store.discard(staging, url)
        fail("interrupted; nothing was written", EXIT_FAILED)
    except Exception as exc:
        store.discard(staging, url)
        fail(f"the audit failed: {type(exc).__name__}: {exc}", EXIT_FAILED)
    finally:
        progress_events.listen(None)
    if not no_report:
        from flows.report import render_report

        render_report(url, s.output.report)
    _print_run_summary(
        url, None if no_report else s.output.report, summary, time.perf_counter() - t0
    )
    if not embedded:
        ui = api_url.removesuffix("/").removesuffix("/api")
        typer.echo(f"prefect: {ui}/runs/flow-run/{summary['flow_run_id']}")


def _print_run_summary(url: str, report: str | None, summary: dict[str, Any], wall: float) -> None:
    from storage import schema as S
    from storage import store

    acc = store.open_group(url, S.ACCOUNTING)
    typer.echo(
        f"run {summary['run_id']}: {summary['blocks']} blocks, "
        f"{summary['residuals']:,} residuals, {wall:.1f} s"
    )
    d = float(acc.delta.values[len(acc.delta) // 2])
    typer.echo(f"{'geolevel':<20} {'rho':>8} {'Bureau eps':>11} {'exact eps':>11}  (delta={d:g})")
    for g in acc.geolevel.values:
        row = acc.sel(geolevel=g, delta=d)
        typer.echo(
            f"{g!s:<20} {float(row.rho):8.4f} {float(row.eps_bureau):11.4f} "
            f"{float(row.eps_exact_upper):11.4f}"
        )
    typer.echo(f"store:  {url}")
    if report:
        typer.echo(f"report: {report}")


@app.command()
def account(
    allocation: Annotated[
        str, typer.Option("--allocation", "-a", help="Shipped allocation id.")
    ] = "dhcp_20220825_paper",
    neighbours: Annotated[
        Neighbours, typer.Option("--neighbours", "-n", help="Neighbour relation.")
    ] = Neighbours.add_remove,
    universe: Annotated[str, typer.Option(help="persons | units.")] = "persons",
    region: Annotated[str, typer.Option(help="US | PR.")] = "US",
    level: Annotated[
        list[str] | None, typer.Option("--level", "-l", help="Geolevel(s); default: all.")
    ] = None,
    delta: Annotated[
        list[float] | None, typer.Option("--delta", "-d", help="δ value(s) in (0, 1).")
    ] = None,
    composed: Annotated[
        bool, typer.Option("--composed/--no-composed", help="Also all levels composed.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Per-level exact ε(δ) of a shipped allocation next to the Bureau's zCDP conversion."""
    from auditlib.allocations import load_allocation

    deltas = delta or [1e-5, 1e-10, 1e-11]
    try:
        for d in deltas:
            if not (math.isfinite(d) and 0 < d < 1):
                raise InvalidParameterError(
                    f"Invalid delta: {d!r}; must be in (0, 1), e.g. --delta 1e-10"
                )
        alloc = load_allocation(allocation)
        all_levels = alloc.geolevels(universe, region)
        levels = level or list(all_levels)
        for g in levels:
            alloc.select(universe, region, g)  # raises on an unknown level
        result = _account(alloc, neighbours.value, universe, region, levels, deltas, composed)
    except DPAuditError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    _print_account(result)


def _account(
    alloc: Any,
    neighbours: str,
    universe: str,
    region: str,
    levels: list[str],
    deltas: list[float],
    composed: bool,
) -> dict[str, Any]:
    import numpy as np

    from auditlib.summaries import account_components

    def one(g: str | None) -> dict[str, Any]:
        comps = alloc.components(neighbours, universe, region, g)
        r = account_components(comps, deltas, np.array([0.0]))
        return {
            "geolevel": g or "all levels composed",
            "n_queries": r["n_queries"],
            "rho": r["rho"],
            "sigma2_min": r["sigma2_min"],
            "sigma2_max": r["sigma2_max"],
            "method": r["method"],
            "epsilon": [
                {
                    "delta": d,
                    "exact": float(r["eps_exact_upper"][i]),
                    "exact_lower": float(r["eps_exact_lower"][i]),
                    "exact_upper": float(r["eps_exact_upper"][i]),
                    "bureau": float(r["eps_bureau"][i]),
                    "cks": float(r["eps_cks"][i]),
                }
                for i, d in enumerate(deltas)
            ],
        }

    out: dict[str, Any] = {
        "allocation": alloc.allocation_id,
        "neighbours": neighbours,
        "universe": universe,
        "region": region,
        "deltas": deltas,
        "note": "exact = certified upper bound of the exact epsilon (exact_lower <= truth <= exact_upper); "
        "bureau = rho + 2 sqrt(rho ln 1/delta); cks = Canonne-Kamath-Steinke conversion of rho-zCDP",
        "levels": [one(g) for g in levels],
    }
    if composed:
        out["composed"] = one(None)
    return out


def _print_account(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(
        title=f"{result['allocation']} · {result['universe']} · {result['region']} · "
        f"neighbours={result['neighbours']}"
    )
    t.add_column("geolevel")
    t.add_column("ρ", justify="right")
    t.add_column("σ²", justify="right")
    for d in result["deltas"]:
        t.add_column(f"Bureau ε @{d:g}", justify="right")
        t.add_column(f"exact ε @{d:g}", justify="right")
    t.add_column("method")
    rows = [*result["levels"], *([result["composed"]] if "composed" in result else [])]
    for r in rows:
        s2 = (
            f"{r['sigma2_min']:.2f}"
            if math.isclose(r["sigma2_min"], r["sigma2_max"])
            else f"{r['sigma2_min']:.2f}–{r['sigma2_max']:.2f}"
        )
        cells = [r["geolevel"], f"{r['rho']:.4f}", s2]
        for e in r["epsilon"]:
            lo, hi = e["exact_lower"], e["exact_upper"]
            exact = f"{hi:.6f}" if hi - lo < 5e-7 else f"[{lo:.4f}, {hi:.4f}]"
            cells += [f"{e['bureau']:.3f}", exact]
        cells.append(r["method"])
        t.add_row(*cells)
    Console().print(t)
    Console().print(
        "exact ε: certified to the digits shown (exact-lattice), or a certified bracket "
        "(bracket-grid); --json gives both ends."
    )


@app.command()
def report(
    store_url: Annotated[str, typer.Argument(metavar="STORE", help="A completed result store.")],
    output: Annotated[
        str, typer.Option("--output", "-o", help="HTML file to write.")
    ] = "report.html",
) -> None:
    """Render the HTML report of a result store."""
    from storage import schema as S
    from storage import store

    try:
        if not store.is_remote(store_url) and not Path(store_url).is_dir():
            raise InvalidParameterError(f"store {store_url!r} not found; give a result store path")
        if not store.root_attrs(store_url).get(S.COMPLETE_ATTR):
            raise InvalidParameterError(f"store {store_url!r} is not a completed dpaudit store")
    except DPAuditError as exc:
        fail(str(exc))
    except Exception as exc:
        fail(f"cannot open store {store_url!r}: {exc}")
    from flows.report import render_report

    path = render_report(store_url, output)
    typer.echo(f"report: {path}")


def main() -> None:
    try:
        app()
    except DPAuditError as exc:  # pragma: no cover - commands catch their own
        typer.echo(f"dpaudit: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)


if __name__ == "__main__":  # pragma: no cover
    main()
