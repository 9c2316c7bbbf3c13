"""Running one flow into one store: the checks before it, the cluster and the Prefect API it runs
on, the staging copy it writes and publishes, and the link to its flow run.

Every command that computes on Dask (run, sweep, mpl-coverage, direct) goes through
:func:`execute`: bad input found here exits 2 before anything is written; a failure while computing
exits 1 and leaves no store behind (a resumable run keeps its staging copy).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer

from flows.cli.checks import check_store_target
from flows.cli.console import StageLog, progress_bar
from flows.cli.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    append_trace,
    debug_mode,
    fail,
    where_logged,
)
from flows.runtime.runlog import captured, new_log

if TYPE_CHECKING:
    from storage.result_store import ResultStore


def check_target_and_scheduler(store: ResultStore, overwrite: bool, scheduler: str) -> Any:
    """The cluster section of a command with ``--store``, ``--overwrite`` and ``--scheduler``.

    Raises :class:`DPAuditError` if the store may not be written or the scheduler (if given)
    does not answer."""
    from flows.spec.cluster import ClusterSection

    check_store_target(store, overwrite)
    cluster = ClusterSection(scheduler=scheduler)
    if scheduler:
        from flows.runtime.reachability import check_scheduler

        check_scheduler(scheduler, cluster.connect_timeout)
    return cluster


def execute(
    flow_fn: Any,
    args: Callable[[ResultStore], tuple[Any, ...]],
    store: ResultStore,
    cluster: Any,
    run_id: str,
    *,
    overwrite: bool = False,
    lines: StageLog | None = None,
) -> tuple[dict[str, Any], str, bool]:
    """Run a flow into a staging copy of ``store`` on the configured cluster; publish it on success.

    Returns (the flow's summary, the Prefect API URL, whether that API was embedded). Any failure
    removes the staging copy and exits (2 for an unreachable cluster, 1 otherwise), but for a
    killed, interrupted (Ctrl-C, SIGTERM) or worker-less run, or one with finished blocks: its
    staging copy is kept, and a run of the same ``run_id`` continues it (other runs' staging
    copies of ``store`` are dropped).
    ``lines``: where a logged run's stage lines go (``dpaudit run``'s; held until the flow runs
    on its cluster, dropped if it cannot start), or ``None``.
    """
    import logging

    from auditlib.exceptions import StoreError

    logging.getLogger("distributed").setLevel(logging.WARNING)  # keep the terminal for the bar
    staging = store.staged(run_id)  # absolute: workers with another working directory agree on it
    try:
        with store.exclusive():  # one run per store at a time
            _prepare_resume(store, staging, run_id, overwrite)
            return execute_locked(flow_fn, args, cluster, run_id, store, staging, lines)
    except StoreError as exc:  # the lock is held by a live run (failures inside exit by themselves)
        fail(str(exc))


def _prepare_resume(
    target: ResultStore, staging: ResultStore, run_id: str, overwrite: bool
) -> None:
    """Keep this spec's staging copy (resumed); drop other specs' (superseded by this run)."""
    import shutil

    from storage.result_store import ResultStore

    for old in target.stale_stagings(run_id):
        stale = ResultStore.at(str(old))
        if stale.make_room():
            continue  # the remains of a removed copy
        if stale.remote:
            stale.remove()
        else:
            shutil.rmtree(old)
    target.prepare_remote(run_id, overwrite)
    if staging != target and staging.make_room():
        typer.echo(
            f"removed {staging.url}: what a failed run's last writes left there (no store); "
            "starting again",
            err=True,
        )
    if staging.exists() and staging != target:
        from flows.audit.production_progress import kept_points

        points = kept_points(staging)
        inside = f" ({points} resume points inside unfinished states)" if points else ""
        typer.echo(f"resuming the interrupted run {run_id} in {staging}{inside}", err=True)


def execute_resumable(
    flow_fn: Any,
    args: Callable[[ResultStore], tuple[Any, ...]],
    store: ResultStore,
    cluster: Any,
    run_id: str,
    *,
    overwrite: bool,
    parts: str,
) -> tuple[dict[str, Any], str, bool]:
    """:func:`execute`, saying how many of the flow's ``parts`` (its summary's ``"tasks"`` chunks
    or ``"jobs"``) a killed run had finished."""
    summary, api_url, embedded = execute(flow_fn, args, store, cluster, run_id, overwrite=overwrite)
    if summary["resumed"]:
        total = summary["jobs"] if parts == "jobs" else summary["tasks"]
        typer.echo(f"resumed {summary['resumed']} of {total} {parts}")
    return summary, api_url, embedded


def execute_locked(
    flow_fn: Any,
    args: Callable[[ResultStore], tuple[Any, ...]],
    cluster: Any,
    run_id: str,
    target: ResultStore,
    staging: ResultStore,
    lines: StageLog | None = None,
) -> tuple[dict[str, Any], str, bool]:
    """:func:`execute` once the store's lock is held: the API, the cluster, the flow, publishing."""
    import time

    from flows.runtime import progress as progress_events
    from flows.runtime.cluster import (
        ClusterConfigError,
        cluster_runner,
        starting_prefect_api,
        worker_count,
    )
    from flows.runtime.reachability import ClusterUnreachableError, redact_url
    from flows.runtime.stop_signal import stop_signal, stopping_on
    from flows.runtime.worker_watch import AllWorkersLostError, run_watched

    log = None if debug_mode() else new_log(f"run-{run_id}")
    outcome: tuple[str, int] | None = None
    keep_log = False  # only a failure midway keeps its log (the error line names it)
    with captured(log, debug_mode()) as terminal:
        # a terminal shows a progress bar; a logged run a line per stage (flows/runtime/progress.py)
        t0 = time.perf_counter()
        try:
            with (
                stopping_on(),  # a job's SIGTERM ends the run as Ctrl-C does
                starting_prefect_api() as (api_url, api_ready),
                progress_bar(terminal) as progress,
            ):
                bar = progress.add_task("starting cluster", total=None)
                embedded = os.environ.get("DPAUDIT_EMBEDDED_API") == api_url

                def hook(done: int, total: int, what: str) -> None:
                    progress.update(bar, completed=done, total=total, description=what)
                    if lines is not None:
                        lines.progress(done, total, what)

                def on_stage(message: str) -> None:
                    progress.update(bar, description=message)
                    if lines is not None:
                        lines.stage(message)
                        lines.release()  # the flow runs: its cluster started

                progress_events.listen(hook, on_stage)
                t_flow = time.perf_counter()

                def warn(message: str) -> None:  # one line on the terminal, above the bar
                    progress.console.print(
                        f"dpaudit: warning: {message}",
                        soft_wrap=True, markup=False, highlight=False, emoji=False,
                    )  # fmt: skip

                # a local cluster starts while an embedded API boots; the flow waits for both
                with cluster_runner(cluster, warn) as runner:
                    api_ready()
                    if lines is not None:
                        took = progress_events.seconds(time.perf_counter() - t0)
                        where = "embedded" if embedded else redact_url(api_url)
                        lines.stage(f"Prefect API ready ({where}, {took})")
                    flow = flow_fn.with_options(
                        task_runner=runner, timeout_seconds=cluster.timeout_s
                    )
                    state = run_watched(flow, args(staging), cluster)
                summary = state.result()
                if lines is not None:
                    took = progress_events.seconds(time.perf_counter() - t_flow)
                    lines.stage(f"flow finished, cluster closed ({took})")
                    lines.release()
                summary["flow_run_id"] = str(state.state_details.flow_run_id)
            t_store = time.perf_counter()
            staging.set_root_attrs(
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
            staging.finalize()
            target.publish(staging)
            if lines is not None:
                took = progress_events.seconds(time.perf_counter() - t_store)
                lines.stage(f"store checksummed and published ({took})")
        except (ClusterUnreachableError, ClusterConfigError) as exc:
            target.discard(staging)
            outcome = (str(exc), EXIT_BAD_INPUT)
            if lines is not None:
                lines.drop()  # bad input: the one error line only
        except AllWorkersLostError as exc:
            append_trace(log, exc)
            keep_log = True
            kept = (
                f"the staged store {staging.url!r} is kept: run the same command again to resume it"
            )
            outcome = (f"{exc}; {kept}; {where_logged(log)}", EXIT_FAILED)
        except KeyboardInterrupt as exc:
            outcome = (_stopped(exc, staging), EXIT_FAILED)
        except Exception as exc:
            if stop_signal(exc) is not None:  # Prefect's crash report failed under the stop
                outcome = (_stopped(exc, staging), EXIT_FAILED)
            else:
                keep_log = True
                outcome = (_failed(exc, log, target, staging), EXIT_FAILED)
        finally:
            progress_events.listen(None)
            if lines is not None:
                lines.release()  # a failure midway: the stages it got through
    if log is not None and not keep_log:
        log.unlink(missing_ok=True)
    if outcome is not None:
        fail(*outcome)
    return summary, api_url, embedded


def _stopped(exc: BaseException, staging: ResultStore) -> str:
    """The line of a run interrupted (Ctrl-C) or stopped by a signal: its staging copy is kept."""
    from flows.runtime.stop_signal import signal_name, stop_signal

    signum = stop_signal(exc)
    how = "interrupted" if signum is None else f"stopped by {signal_name(signum)}"
    return (
        f"{how}; finished blocks are kept in {staging.url!r}: run the same command again to resume"
    )


def _failed(
    exc: Exception,
    log: Any,
    target: ResultStore,
    staging: ResultStore,
) -> str:
    """The line of a run that failed midway, its trace appended to ``log``; its staging copy
    deleted unless it holds finished blocks (its processes stopped under it, e.g. its API
    server or workers ended by the system: resumable)."""
    from flows.runtime.cluster import describe_failure

    append_trace(log, exc)
    failure = describe_failure(exc).rstrip(".")
    done = _finished_blocks(staging)
    if done:
        failure += (
            f"; the staged store {staging.url!r} keeps its {done} finished block(s): run the "
            "same command again to resume it"
        )
    else:
        target.discard(staging)
    return f"the run failed: {failure}; {where_logged(log)}"


def _finished_blocks(staging: ResultStore) -> int:
    """Residual blocks a failed run finished in its staging copy (0 for other stores): kept for a
    re-run to resume, not discarded with the rest."""
    try:
        return len(staging.done_blocks())
    except Exception:  # no residuals group (another flow's store), or none written yet
        return 0


def print_prefect_link(api_url: str, embedded: bool, flow_run_id: str) -> None:
    """The flow run's page in the Prefect UI (not for an embedded API: it is gone after the run)."""
    if not embedded:
        ui = api_url.removesuffix("/").removesuffix("/api")
        typer.echo(f"prefect: {ui}/runs/flow-run/{flow_run_id}")


def publish_artifacts(
    api_url: str, embedded: bool, flow_run_id: str, build: Callable[[], list[Any]]
) -> None:
    """The run's artifacts (``flows.audit.artifacts``) on its flow run page; not for an embedded API
    (gone after the run). A failure here leaves the written store alone and says so in one line."""
    if embedded:
        return
    from flows.audit.artifacts import publish

    try:
        publish(build(), flow_run_id)
    except Exception as exc:
        typer.echo(
            f"dpaudit: note: the run's artifacts were not sent to {api_url} "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})",
            err=True,
        )
