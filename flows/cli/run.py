"""The commands of an audit and its store: ``run`` (simulate, estimate, account, publish, report),
``spec`` (print or check a spec), ``verify`` (a store's checksums), ``report`` (a store's HTML
report) and ``serve`` (scheduled runs on a Prefect server)."""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from auditlib.exceptions import DPAuditError, InvalidParameterError, StoreError
from flows.cli.checks import (
    check_output_file,
    check_parents,
    check_store_exists,
    check_store_target,
    load_spec,
)
from flows.cli.console import StageLog, logged_output, progress_bar
from flows.cli.errors import EXIT_FAILED, fail, fail_with_trace
from flows.cli.execute import execute, print_prefect_link, publish_artifacts
from flows.cli.options import OverwriteFileOption
from flows.cli.summary import print_run_summary
from flows.runtime.cluster import apply_prefect_defaults

if TYPE_CHECKING:
    from storage.result_store import ResultStore


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
    from flows.spec import parse_spec
    from storage.result_store import ResultStore

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
        store = ResultStore.at(s.output.store)  # opened once: every check and the run use it
        finished = finished_run(s, store)
        if finished and not no_report and not Path(s.output.report).exists():
            finish_report(s, store, finished)  # the run stopped while writing its report
            return
        try:
            check_store_target(store, s.output.overwrite)  # every output first, then the cluster
        except StoreError as exc:
            if not finished:
                raise
            raise StoreError(
                f"{exc} (it holds this spec's finished run {finished}"
                + ("" if no_report else f", and its report {s.output.report} is written")
                + ")"
            ) from None
        if not no_report:
            check_output_file(s.output.report, s.output.overwrite, "report", create=True)
        if s.cluster.scheduler:
            from flows.runtime.reachability import check_scheduler

            check_scheduler(s.cluster.scheduler, s.cluster.connect_timeout)
    except DPAuditError as exc:
        fail(str(exc))
    lines = StageLog(held=True) if logged_output() else None  # printed once the flow runs
    if lines is not None:
        lines.stage(
            f"spec loaded: {spec_path.name if spec_path else 'default'} ({s.release.kind}, "
            f"{len(s.geolevels)} levels, {runs_of(s)})"
        )
    run_audit(s, store, no_report, lines)


def finished_run(s: Any, store: ResultStore) -> str:
    """The run id of this spec's finished run if ``store`` holds it, else "" (also with
    ``--overwrite``: then the run is done again)."""
    from flows.audit import flow as audit

    attrs = None if s.output.overwrite or store.remote else store.completed_attrs()
    held = (attrs or {}).get("run_id")
    return held if isinstance(held, str) and held == audit.run_id_for(s) else ""


def finish_report(s: Any, store: ResultStore, run_id: str) -> None:
    """A rerun of a run that stopped after publishing its store but before its report was
    written: nothing is computed again; the report is rendered from the store (verified first)."""
    url = store.shown
    check_output_file(s.output.report, False, "report", create=True)
    typer.echo(
        f"dpaudit: {url} holds this spec's finished run {run_id} but not its report (the run "
        "stopped while writing it): writing the report from the store"
    )
    lines = StageLog(held=False) if logged_output() else None
    try:
        render_with_progress(store, s.output.report, lines)
    except DPAuditError:
        raise
    except Exception as exc:
        fail_with_trace(
            "report",
            f"the report of {url!r} failed ({type(exc).__name__}: {exc}); render it with "
            f"`dpaudit report {url} -o {s.output.report}`",
            exc,
        )
    typer.echo(f"store:  {url}")
    typer.echo(f"report: {s.output.report}")


def runs_of(s: Any) -> str:
    """ "8 replicates", or for a published release its runs: "30 published runs"."""
    if s.release.kind == "observed":
        n = len(s.release.published) or len(s.release.published_files)
        return f"{n} published run{'s' if n != 1 else ''}"
    n = s.audit.replicates
    return f"{n} replicate{'s' if n != 1 else ''}"


def run_audit(s: Any, store: ResultStore, no_report: bool, lines: StageLog | None = None) -> None:
    """Run the audit of spec ``s`` into ``store`` (resuming an interrupted run of the same
    spec), render its report unless ``no_report``, and print the summary (and the stages on
    ``lines``, when the output is logged)."""
    from prefect import tags

    from flows.audit import flow as audit
    from flows.audit.artifacts import audit_artifacts
    from flows.audit.labels import audit_tags

    t0 = time.perf_counter()
    url = store.shown
    run_id = audit.run_id_for(s)
    with tags(*audit_tags(s)):  # the flow run's tags in the Prefect UI
        summary, api_url, embedded = execute(
            audit.audit_flow,
            lambda staging: (s, staging, run_id),
            store,
            s.cluster,
            run_id,
            overwrite=s.output.overwrite,
            lines=lines,
        )
    from flows.cli.published import has_error_bars, write_error_bars_csv

    if has_error_bars(store):  # a published table's intervals, beside it (the report links it)
        write_error_bars_csv(store)
    if not no_report:
        try:
            render_with_progress(store, s.output.report, lines)
        except Exception as exc:
            fail_with_trace(
                "report",
                f"the store {url!r} is written, but its report failed ({type(exc).__name__}: "
                f"{exc}); render it again with `dpaudit report {url} -o {s.output.report}`",
                exc,
            )
    report = None if no_report else s.output.report
    print_run_summary(store, report, summary, time.perf_counter() - t0)
    publish_artifacts(
        api_url,
        embedded,
        summary["flow_run_id"],
        lambda: audit_artifacts(store, run_id, report, s.output.report_url),
    )
    print_prefect_link(api_url, embedded, summary["flow_run_id"])


def render_with_progress(
    store: ResultStore,
    output: str,
    lines: StageLog | None = None,
    compare_with: ResultStore | None = None,
) -> Path:
    """Render the report of ``store`` to ``output``, saying so: on a terminal a bar of the
    report's sections (it leaves nothing behind), in a logged run a line when it starts and one
    when the report is written (:mod:`flows.cli.console`; ``lines``: the run's, or new ones)."""
    from flows.runtime import progress as events

    if lines is None and logged_output():
        lines = StageLog()
    t0 = time.perf_counter()
    if lines is not None:
        lines.stage(f"rendering the report of {store.shown}")
    from flows.report.render import render_report  # matplotlib: seconds on a busy machine

    with progress_bar(sys.stderr) as progress:
        bar = progress.add_task("report", total=None)

        def hook(done: int, total: int, what: str) -> None:
            progress.update(bar, completed=done, total=total, description=what)
            if lines is not None:
                lines.progress(done, total, what)

        events.listen(hook)
        try:
            path = render_report(store, output, compare_with=compare_with)
        finally:
            events.listen(None)
    if lines is not None:
        lines.stage(f"report written: {output} ({events.seconds(time.perf_counter() - t0)})")
    return path


def spec(
    path: Annotated[Path | None, typer.Argument(help="A spec to validate and print.")] = None,
) -> None:
    """Print the default audit spec (or validate SPEC and print it normalized)."""
    from flows.spec import default_spec_text

    if path is None:
        typer.echo(default_spec_text())
        return
    try:
        typer.echo(load_spec(path).to_toml())
    except DPAuditError as exc:
        fail(str(exc))


def verify(
    store_url: Annotated[str, typer.Argument(metavar="STORE", help="A completed result store.")],
) -> None:
    """Check every array of a store against the checksums recorded when it was written."""
    from storage.result_store import ResultStore

    try:
        store = ResultStore.at(store_url)
        check_store_exists(store)
        v = store.verify()
    except DPAuditError as exc:
        fail(str(exc))
    if len(v.problems) == 1:  # one changed document or chunk: one line naming it
        fail(
            f"store {store_url!r} failed its integrity check: {v.problems[0]}; re-run the audit "
            "(with --overwrite) to rebuild it",
            EXIT_FAILED,
        )
    for problem in v.problems:
        typer.echo(f"dpaudit: {problem}", err=True)
    if v.problems:
        fail(
            f"store {store_url!r} failed its integrity check ({len(v.problems)} problems); "
            "re-run the audit (with --overwrite) to rebuild it",
            EXIT_FAILED,
        )
    for note in v.notes:  # e.g. a store written before metadata digests were recorded
        typer.echo(f"dpaudit: note: {note}", err=True)
    typer.echo(f"ok: {store_url}: {v.arrays} arrays and {v.blocks} blocks match their checksums")


def report(
    store_url: Annotated[str, typer.Argument(metavar="STORE", help="A completed result store.")],
    output: Annotated[
        str,
        typer.Option("--output", "-o", help="HTML file to write, in an existing directory."),
    ] = "report.html",
    overwrite: OverwriteFileOption = False,
    compare_with: Annotated[
        str | None,
        typer.Option(
            "--compare",
            metavar="OTHER_STORE",
            help="Another audit's store: add a section comparing its numbers with STORE's.",
        ),
    ] = None,
) -> None:
    """Render the HTML report of a result store."""
    from storage import schema as S
    from storage.result_store import ResultStore

    other = None
    try:
        store = ResultStore.at(store_url)
        check_output_file(output, overwrite, "report", create=False)
        check_store_exists(store)
        if not store.root_attrs().get(S.COMPLETE_ATTR):
            raise InvalidParameterError(f"store {store_url!r} is not a completed dpaudit store")
        if compare_with is not None:
            from flows.cli.compare import check_audit_kinds, check_audit_store

            other = ResultStore.at(compare_with)
            check_audit_store(other, "--compare store")
            check_audit_kinds([("STORE", store), ("--compare store", other)])
    except DPAuditError as exc:
        fail(str(exc))
    except Exception as exc:
        fail(f"cannot open store {store_url!r}: {exc}")
    try:
        store.check()  # never render from a store with a missing or corrupt chunk
    except DPAuditError as exc:
        fail(str(exc), EXIT_FAILED)
    try:
        path = render_with_progress(store, output, compare_with=other)
    except DPAuditError as exc:  # e.g. the other store lacks this store's headline δ
        fail(str(exc))
    typer.echo(f"report: {path}")


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
    from flows.audit.scheduled import (
        build_deployments,
        check_cron,
        expand_placeholders,
        has_placeholder,
    )
    from flows.runtime.reachability import check_reachable, redact_url

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
        from storage.store import is_remote

        now = datetime.now(UTC)
        for _, s in specs:  # the directories the runs will write into, as of today
            outputs = [("output.store", s.output.store)]
            outputs += [] if no_report else [("output.report", s.output.report)]
            for key, path in outputs:
                if not is_remote(path):
                    check_parents(Path(expand_placeholders(path, now)), key, create=True)
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
