"""The ``dpaudit`` command line.

Bad input (a malformed spec, an unknown allocation or geolevel, δ outside (0, 1), an existing store, an
unreachable cluster) exits with code 2 and one line on stderr, before anything is written. A run that
fails while computing exits with code 1 and leaves no store behind. Accounting commands live in
``flows/cli/accounting.py``.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from auditlib.exceptions import DPAuditError, InvalidParameterError
from flows.cli import (
    accounting,  # noqa: F401  (registers account, calibrate, tradeoff)
    direct,  # noqa: F401  (registers direct)
)
from flows.cli.options import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    Neighbours,
    OverwriteOption,
    SchedulerOption,
    app,
    fail,
)
from flows.runtime import apply_prefect_defaults

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "Neighbours", "app", "fail", "main"]


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


def _check_target_and_scheduler(store_url: str, overwrite: bool, scheduler: str) -> Any:
    """The cluster section of a command with ``--store``, ``--overwrite`` and ``--scheduler``.

    Raises :class:`DPAuditError` if the store may not be written or the scheduler (if given)
    does not answer."""
    from flows.spec.cluster import ClusterSection
    from storage import store

    store.check_target(store_url, overwrite)
    cluster = ClusterSection(scheduler=scheduler)
    if scheduler:
        from flows.runtime import check_reachable

        check_reachable(scheduler, "Dask scheduler", "start one or omit --scheduler")
    return cluster


def _execute(
    flow_fn: Any,
    args: Callable[[str], tuple[Any, ...]],
    url: str,
    cluster: Any,
    run_id: str,
    *,
    resume: bool = False,
    overwrite: bool = False,
) -> tuple[dict[str, Any], str, bool]:
    """Run a flow into a staging copy of ``url`` on the configured cluster; publish it on success.

    Returns (the flow's summary, the Prefect API URL, whether that API was embedded). Any failure
    removes the staging copy and exits (2 for an unreachable cluster, 1 otherwise). With ``resume``
    the staging copy of a killed or interrupted run of the same ``run_id`` is continued instead.
    """
    import logging

    from auditlib.exceptions import StoreError
    from storage import store

    logging.getLogger("distributed").setLevel(logging.WARNING)  # keep the terminal for the bar
    target = store.absolute(url)  # absolute: workers with another working directory agree on it
    staging = store.staging_path(target, run_id)
    try:
        with store.exclusive(target):  # one run per store at a time
            if resume:
                _prepare_resume(target, staging, run_id, overwrite)
            else:
                store.discard(staging, target)  # leftovers of an interrupted run
                store.prepare_remote(target, run_id, overwrite=True)  # check_target agreed
            return _execute_locked(flow_fn, args, cluster, run_id, target, staging, resume)
    except StoreError as exc:  # the lock is held by a live run (failures inside exit by themselves)
        fail(str(exc))


def _prepare_resume(target: str, staging: str, run_id: str, overwrite: bool) -> None:
    """Keep this spec's staging copy (resumed); drop other specs' (superseded by this run)."""
    import shutil

    from storage import store

    for old in store.stale_stagings(target, run_id):
        if store.is_remote(str(old)):
            store.remove(str(old))
        else:
            shutil.rmtree(old)
    store.prepare_remote(target, run_id, overwrite)
    if store.exists(staging) and staging != target:
        typer.echo(f"resuming the interrupted run {run_id} in {staging}", err=True)


def _execute_locked(
    flow_fn: Any,
    args: Callable[[str], tuple[Any, ...]],
    cluster: Any,
    run_id: str,
    target: str,
    staging: str,
    resume: bool = False,
) -> tuple[dict[str, Any], str, bool]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from flows import progress as progress_events
    from flows.runtime import (
        ClusterConfigError,
        ClusterUnreachableError,
        cluster_runner,
        describe_failure,
        prefect_api,
        worker_count,
    )
    from storage import store

    try:
        with (
            prefect_api() as api_url,
            Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            ) as progress,
        ):
            bar = progress.add_task("starting cluster", total=None)

            def hook(done: int, total: int, what: str) -> None:
                progress.update(bar, completed=done, total=total, description=what)

            progress_events.listen(hook)
            with cluster_runner(cluster) as runner:
                flow = flow_fn.with_options(task_runner=runner, timeout_seconds=cluster.timeout_s)
                state = flow(*args(staging), return_state=True)
            summary = state.result()
            summary["flow_run_id"] = str(state.state_details.flow_run_id)
            embedded = os.environ.get("DPAUDIT_EMBEDDED_API") == api_url
        store.set_root_attrs(
            staging,
            {
                "run_id": run_id,
                "dask_scheduler": cluster.scheduler
                or getattr(cluster, "cluster_class", None)
                or "LocalCluster",
                "n_workers": worker_count(cluster),
                "prefect_api": "embedded" if embedded else api_url,
                "prefect_flow_run_id": summary["flow_run_id"],
            },
        )
        store.finalize(staging)
        store.publish(staging, target)
    except (ClusterUnreachableError, ClusterConfigError) as exc:
        store.discard(staging, target)
        fail(str(exc))
    except KeyboardInterrupt:
        if resume:
            fail(
                f"interrupted; finished blocks are kept in {staging!r}: run the same command "
                "again to resume",
                EXIT_FAILED,
            )
        store.discard(staging, target)
        fail("interrupted; nothing was written", EXIT_FAILED)
    except Exception as exc:
        store.discard(staging, target)
        fail(f"the run failed: {describe_failure(exc)}", EXIT_FAILED)
    finally:
        progress_events.listen(None)
    return summary, api_url, embedded


def _print_prefect_link(api_url: str, embedded: bool, flow_run_id: str) -> None:
    if not embedded:
        ui = api_url.removesuffix("/").removesuffix("/api")
        typer.echo(f"prefect: {ui}/runs/flow-run/{flow_run_id}")


def _run_audit(s: Any, url: str, no_report: bool) -> None:
    from flows import audit

    t0 = time.perf_counter()
    run_id = audit.run_id_for(s)
    summary, api_url, embedded = _execute(
        audit.audit_flow,
        lambda staging: (s, staging, run_id),
        url,
        s.cluster,
        run_id,
        resume=True,
        overwrite=s.output.overwrite,
    )
    if not no_report:
        from flows.report.render import render_report

        render_report(url, s.output.report)
    report = None if no_report else s.output.report
    _print_run_summary(url, report, summary, time.perf_counter() - t0)
    _print_prefect_link(api_url, embedded, summary["flow_run_id"])


def _print_run_summary(url: str, report: str | None, summary: dict[str, Any], wall: float) -> None:
    from storage import schema as S
    from storage import store

    if S.ACCOUNTING not in store.groups(url):
        epl = store.open_group(url, S.EPL)
        typer.echo(f"run {summary['run_id']}: {summary['blocks']} blocks, {wall:.1f} s")
        for g in epl.geolevel.values:
            typer.echo(f"{g!s:<8} EPL {float(epl.epl_pooled.sel(geolevel=g).max()):.4f}")
        typer.echo(f"store:  {url}")
        if report:
            typer.echo(f"report: {report}")
        return
    acc = store.open_group(url, S.ACCOUNTING)
    resumed = summary.get("resumed_blocks", 0)
    typer.echo(
        f"run {summary['run_id']}: {summary['blocks']} blocks"
        f"{f' ({resumed} resumed)' if resumed else ''}, "
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
def sweep(
    allocation: Annotated[
        list[str] | None, typer.Option("--allocation", "-a", help="Allocation(s); default: all.")
    ] = None,
    neighbours: Annotated[
        list[Neighbours] | None, typer.Option("--neighbours", "-n", help="Default: both.")
    ] = None,
    delta: Annotated[
        list[float] | None, typer.Option("--delta", "-d", help="δ value(s) in (0, 1).")
    ] = None,
    store_url: Annotated[
        str, typer.Option("--store", help="Output store.")
    ] = "results/accounting.zarr",
    points: Annotated[int, typer.Option("--points", help="ε grid points of the curves.")] = 200,
    scheduler: Annotated[
        str, typer.Option("--scheduler", help="Dask scheduler address; empty: local cluster.")
    ] = "",
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace the store.")] = False,
) -> None:
    """Account every allocation × universe × region × level × neighbour relation on Dask."""
    apply_prefect_defaults()
    from auditlib.allocations import list_allocations, load_allocation
    from flows.sweep import accounting_sweep_flow, plan_jobs, sweep_run_id

    allocs = allocation or list_allocations()
    nbs = [n.value for n in neighbours] if neighbours else ["add_remove", "bounded"]
    deltas = sorted(set(delta or [1e-5, 1e-10, 1e-11]), reverse=True)
    try:
        for a in allocs:
            load_allocation(a)
        for d in deltas:
            if not (math.isfinite(d) and 1e-20 <= d < 1):
                raise InvalidParameterError(f"Invalid delta: {d!r}; must be in [1e-20, 1)")
        if not 10 <= points <= 5000:
            raise InvalidParameterError(f"Invalid --points: {points}; allowed 10..5000")
        cluster = _check_target_and_scheduler(store_url, overwrite, scheduler)
    except DPAuditError as exc:
        fail(str(exc))
    run_id = sweep_run_id(allocs, nbs, deltas, points)
    t0 = time.perf_counter()
    summary, api_url, embedded = _execute(
        accounting_sweep_flow,
        lambda staging: (staging, allocs, nbs, deltas, points),
        store_url,
        cluster,
        run_id,
        resume=True,
        overwrite=overwrite,
    )
    if summary["resumed"]:
        typer.echo(f"resumed {summary['resumed']} of {summary['jobs']} jobs")
    n = len(plan_jobs(allocs, nbs))
    typer.echo(f"sweep {run_id}: {n} jobs, {time.perf_counter() - t0:.1f} s")
    typer.echo(f"store:  {store_url} (group 'accounting_sweep')")
    _print_prefect_link(api_url, embedded, summary["flow_run_id"])


#: the names of auditlib.mpl.coverage.CATALOGUE, for --help without importing it (a test checks)
MPL_CATALOGUE_NAMES = (
    "laplace, laplace_broken, report_noisy_max, exponential, continuous_noisy_max, "
    "geometric_count, gdpc_count, adpc_count, census_dg_count, randomized_response, randomized_response_k4, "
    "randomized_response_broken, svt2, svt4, svt5, svt6"
)


@app.command(name="mpl-coverage")
def mpl_coverage(
    mechanism: Annotated[
        list[str] | None,
        typer.Option(
            "--mechanism",
            "-m",
            help=f"Catalogue mechanism(s), repeatable: {MPL_CATALOGUE_NAMES}. Default: laplace.",
        ),
    ] = None,
    epsilon: Annotated[
        list[float] | None,
        typer.Option("--epsilon", "-e", help="Claimed ε₀ (default 0.2 0.7 1.5)."),
    ] = None,
    repetitions: Annotated[int, typer.Option("--reps", help="Repetitions per cell.")] = 100,
    n: Annotated[int, typer.Option("--n", help="Draws per input, step 1.")] = 20_000,
    n_confidence: Annotated[
        int, typer.Option("--N", help="Fresh draws, confidence step.")
    ] = 50_000,
    alpha: Annotated[float, typer.Option("--alpha", help="1 − confidence level.")] = 0.05,
    seed: Annotated[int, typer.Option("--seed")] = 2022,
    store_url: Annotated[str, typer.Option("--store")] = "results/mpl.zarr",
    scheduler: SchedulerOption = "",
    overwrite: OverwriteOption = False,
) -> None:
    """MPL coverage experiments (seed 002 §V) on mechanisms with known ε, fanned out on Dask."""
    apply_prefect_defaults()
    from auditlib.mpl.coverage import CATALOGUE
    from flows.mpl import GROUP, coverage_run_id, mpl_coverage_flow
    from storage import store

    mechs = mechanism or ["laplace"]
    eps = epsilon or [0.2, 0.7, 1.5]
    try:
        for m in mechs:
            if m not in CATALOGUE:
                raise InvalidParameterError(
                    f"Unknown mechanism: {m!r}; allowed: {', '.join(CATALOGUE)}"
                )
        for e in eps:
            if not (math.isfinite(e) and e > 0):
                raise InvalidParameterError(f"Invalid epsilon: {e!r}; must be > 0")
        given: tuple[tuple[str, list[str]], ...] = (
            ("--mechanism", mechs),
            ("--epsilon", [f"{e:g}" for e in eps]),
        )
        for what, values in given:
            dup = sorted({v for v in values if values.count(v) > 1})
            if dup:
                raise InvalidParameterError(
                    f"Invalid {what}: {', '.join(dup)} given twice; give each value once."
                )
        if not 0 < alpha < 1:
            raise InvalidParameterError(f"Invalid alpha: {alpha!r}; must be in (0, 1)")
        if repetitions < 1 or n < 10 or n_confidence < 10:
            raise InvalidParameterError(
                f"Invalid sizes: reps={repetitions}, n={n}, N={n_confidence}; need reps >= 1, "
                "n and N >= 10"
            )
        cluster = _check_target_and_scheduler(store_url, overwrite, scheduler)
    except DPAuditError as exc:
        fail(str(exc))
    chunk = 10
    run_id = coverage_run_id(mechs, eps, repetitions, n, n_confidence, alpha, seed, chunk)
    summary, api_url, embedded = _execute(
        mpl_coverage_flow,
        lambda staging: (staging, mechs, eps, repetitions, n, n_confidence, alpha, seed, chunk),
        store_url,
        cluster,
        run_id,
        resume=True,
        overwrite=overwrite,
    )
    if summary["resumed"]:
        typer.echo(f"resumed {summary['resumed']} of {summary['tasks']} chunks")
    ds = store.open_group(store_url, GROUP)
    typer.echo(f"{'mechanism':<27} {'eps0':>6} {'eps*_C':>8} {'coverage':>9} {'LB > claim':>11}")
    for m in ds.mechanism.values:
        for e0 in ds.epsilon0.values:
            c = ds.sel(mechanism=m, epsilon0=e0)
            typer.echo(
                f"{m!s:<27} {e0:6.2f} {float(c.epsilon_c):8.4f} {float(c.coverage):9.3f} "
                f"{float(c.exceeds_claim):11.3f}"
            )
    typer.echo(f"store:  {store_url} (group {GROUP!r})")
    _print_prefect_link(api_url, embedded, summary["flow_run_id"])


@app.command()
def serve(
    spec_paths: Annotated[
        list[Path] | None,
        typer.Argument(metavar="SPEC...", help="Audit specs (TOML); default: the shipped spec."),
    ] = None,
    cron: Annotated[
        str, typer.Option("--cron", help='Schedule of every deployment, e.g. "0 3 * * *".')
    ] = "0 3 * * *",
    timezone: Annotated[str, typer.Option("--timezone", help="IANA time zone of --cron.")] = "UTC",
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip the HTML reports.")] = False,
) -> None:
    """Register one scheduled deployment per spec on the Prefect server and run them as they come.

    Needs PREFECT_API_URL (a `prefect server start`); keeps serving until interrupted. Output paths
    may contain {date} and {time} (UTC), filled in when a run starts.
    """
    apply_prefect_defaults()
    from flows.runtime import check_reachable, redact_url
    from flows.serve import build_deployments, check_cron, has_placeholder
    from flows.spec import load_spec

    try:
        api = os.environ.get("PREFECT_API_URL", "")
        if not api:
            raise InvalidParameterError(
                "dpaudit serve needs a Prefect server: start one (`prefect server start`) and set "
                "PREFECT_API_URL=http://127.0.0.1:4200/api"
            )
        from urllib.parse import urlparse

        u = urlparse(api)
        check_reachable(
            f"tcp://{u.hostname}:{u.port or (443 if u.scheme == 'https' else 80)}",
            f"Prefect API (PREFECT_API_URL={redact_url(api)})",
            "start it (`prefect server start`) or fix PREFECT_API_URL",
        )
        check_cron(cron, timezone)
        paths: list[Path | None] = list(spec_paths) if spec_paths else [None]
        specs = [(p, load_spec(p)) for p in paths]
        deployments = build_deployments(specs, cron, timezone, report=not no_report)
    except DPAuditError as exc:
        fail(str(exc))
    for p, s in specs:
        if not has_placeholder(s.output.store) and not s.output.overwrite:
            typer.echo(
                f"note: {p or 'default spec'}: output.store has no {{date}}; runs after the first "
                "fail on the existing store unless overwrite = true",
                err=True,
            )
    from prefect import serve as prefect_serve

    prefect_serve(*deployments, print_starting_message=True)


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
    from flows.report.render import render_report
    from storage import checksums

    try:
        checksums.check(store_url)  # never render from a store with a missing or corrupt chunk
    except DPAuditError as exc:
        fail(str(exc), EXIT_FAILED)
    path = render_report(store_url, output)
    typer.echo(f"report: {path}")


@app.command()
def verify(
    store_url: Annotated[str, typer.Argument(metavar="STORE", help="A completed result store.")],
) -> None:
    """Check every array of a store against the checksums recorded when it was written."""
    from storage import checksums, store

    if not store.exists(store_url):
        fail(f"store {store_url!r} not found; give a result store path or URL")
    try:
        v = checksums.verify(store_url)
    except DPAuditError as exc:
        fail(str(exc))
    for problem in v.problems:
        typer.echo(f"dpaudit: {problem}", err=True)
    if v.problems:
        fail(
            f"store {store_url!r} failed its integrity check ({len(v.problems)} problem(s)); "
            "re-run the audit (with --overwrite) to rebuild it",
            EXIT_FAILED,
        )
    typer.echo(f"ok: {store_url}: {v.arrays} arrays and {v.blocks} blocks match their checksums")


def main() -> None:
    try:
        app()
    except DPAuditError as exc:  # pragma: no cover - commands catch their own
        typer.echo(f"dpaudit: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)


if __name__ == "__main__":  # pragma: no cover
    main()
