"""Where the flow runs: the Prefect API it reports to and the Dask cluster its tasks run on.
(The settings applied before Prefect and Dask are imported, the API and the cluster share one
import order. The embedded API's process is in flows/runtime/embedded_api.py, the reachability
checks in flows/runtime/reachability.py, Dask's TCP timeout of a run's clusters in
flows/runtime/dask_tcp.py.)

- No ``PREFECT_API_URL``: one embedded API server is started up front and its URL exported, so every
  Dask worker process reports to it (instead of each starting its own); logs are drained before it
  stops. The server ends with this process however it ends, ``kill -9`` included (flows/runtime/lifeline.py).
- ``cluster.scheduler`` empty: a local Dask cluster of processes; otherwise that scheduler, checked
  within ``cluster.connect_timeout`` seconds to answer as a Dask scheduler before anything is written
  (:func:`~flows.runtime.reachability.check_scheduler`). ``cluster.class``: that cluster class (by import
  path) built with ``cluster.kwargs`` before the flow starts, so a class that cannot start is a
  configuration error; its servers listen on loopback unless the kwargs say otherwise
  (:func:`cluster_class_kwargs`).
- Prefect's and Dask's logging goes to the run's log file, not the console (flows/runtime/runlog.py).
- A failed flow run leaves no task run Running in the API (:func:`fail_orphaned_task_runs`): a task
  whose worker died on every attempt (Dask's ``KilledWorker``) never reports its end to Prefect.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlparse

from auditlib.exceptions import DPAuditError
from flows.runtime.cluster_class import LOOPBACK, class_failure, cluster_class_kwargs
from flows.runtime.dask_malloc import apply_malloc_defaults
from flows.runtime.dask_tcp import apply_dask_defaults, tcp_timeout_warning
from flows.runtime.embedded_api import EmbeddedAPIServer, wait_healthy
from flows.runtime.reachability import (
    CONNECT_TIMEOUT_S,
    check_reachable,
    check_scheduler,
    redact_url,
)
from flows.runtime.runlog import route_logs
from flows.runtime.runlog import (
    run_log_path as run_log_path,  # the CLI names it in a failed run's line
)

#: settings that must be in place before Prefect is imported (see docs/stack.md)
PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_LEVEL": "WARNING",
}


class ClusterConfigError(DPAuditError, ValueError):
    """The configured Dask cluster class cannot be built with its kwargs."""


def apply_prefect_defaults() -> None:
    """Settings that must be in place before Prefect and Dask are imported: Prefect's defaults, and
    their logging routed to the run's log file (:func:`run_log_path`), off the console."""
    for k, v in PREFECT_DEFAULTS.items():
        os.environ.setdefault(k, v)
    startup_timeout_s()  # a bad start-up ceiling is one line here, not Prefect's settings error
    progress_every_s()  # and a bad resume-point interval, not a failed task
    route_logs()
    if "DASK_LOGGING" not in os.environ:  # Dask logging set by the user: distributed at warning
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")


#: how long an embedded Prefect API may take to answer its first health check, unless
#: PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS says otherwise (Prefect's own setting: one
#: knob for its ephemeral servers and dpaudit's embedded one)
STARTUP_TIMEOUT_S = 120
STARTUP_TIMEOUT_ENV = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"


def startup_timeout_s() -> float:
    """The embedded API's start-up ceiling in seconds: the environment's setting, else
    :data:`STARTUP_TIMEOUT_S`."""
    raw = os.environ.get(STARTUP_TIMEOUT_ENV, "").strip()
    if not raw:
        return float(STARTUP_TIMEOUT_S)
    try:
        value = int(raw)  # Prefect reads the same setting as an integer
    except ValueError:
        value = 0
    if value <= 0:
        raise ClusterConfigError(
            f"Invalid {STARTUP_TIMEOUT_ENV}={raw!r}: the seconds an embedded Prefect API may take "
            f"to start, a positive whole number (e.g. {STARTUP_TIMEOUT_S}); set it so or unset it"
        )
    return float(value)


#: a production TopDown replicate keeps its finished chunks at most once per this many seconds of
#: its work (``flows.audit.production_progress``; a small state's run keeps none)
PROGRESS_EVERY_S = 60.0
PROGRESS_EVERY_ENV = "DPAUDIT_PROGRESS_EVERY_S"


def progress_every_s() -> float:
    """Seconds of a replicate's work between the saves of its resume points: the environment's
    :data:`PROGRESS_EVERY_ENV`, else :data:`PROGRESS_EVERY_S`."""
    raw = os.environ.get(PROGRESS_EVERY_ENV, "").strip()
    if not raw:
        return PROGRESS_EVERY_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (0 <= value < float("inf")):
        raise ClusterConfigError(
            f"Invalid {PROGRESS_EVERY_ENV}={raw!r}: the seconds of work between a production "
            f"TopDown state's resume points, a number ≥ 0 (0: after every chunk); set it so or "
            f"unset it for {PROGRESS_EVERY_S:g}"
        )
    return value


@contextmanager
def prefect_api(startup_timeout: float | None = None) -> Iterator[str]:
    """Yield the Prefect API URL: the configured one, or one embedded server for this process
    (started within ``startup_timeout`` seconds, default :func:`startup_timeout_s`)."""
    with starting_prefect_api(startup_timeout) as (url, ready):
        ready()
        yield url


@contextmanager
def starting_prefect_api(
    startup_timeout: float | None = None,
) -> Iterator[tuple[str, Callable[[], None]]]:
    """Yield the Prefect API URL and a ``ready()`` that returns once the API answers: the
    configured API (checked reachable first; ``ready`` returns at once), or an embedded server
    whose process is launched here and its URL exported, so that what starts meanwhile (a local
    Dask cluster's workers) reports to it, while it boots; ``ready`` waits for its health check
    within ``startup_timeout`` seconds of the launch (default :func:`startup_timeout_s`)."""
    from prefect.settings import get_current_settings

    # the environment, the active Prefect profile or an enclosing test harness may name an API
    url = os.environ.get("PREFECT_API_URL") or get_current_settings().api.url
    if url:
        u = urlparse(url)
        port = u.port or (443 if u.scheme == "https" else 80)
        check_reachable(
            f"tcp://{u.hostname}:{port}",
            f"Prefect API (PREFECT_API_URL={redact_url(url)})",
            "start it (`prefect server start`) or unset PREFECT_API_URL to use an embedded one",
        )
        yield url, lambda: None
        return
    from prefect.settings import PREFECT_API_URL, temporary_settings

    timeout = startup_timeout_s() if startup_timeout is None else startup_timeout
    server = EmbeddedAPIServer()
    deadline = time.monotonic() + timeout
    server.launch()
    answered: list[bool] = []

    def ready() -> None:
        if not answered:
            wait_healthy(server, deadline)
            answered.append(True)

    os.environ["PREFECT_API_URL"] = server.api_url
    os.environ["DPAUDIT_EMBEDDED_API"] = server.api_url
    try:
        with temporary_settings({PREFECT_API_URL: server.api_url}):
            try:
                yield server.api_url, ready
            finally:
                if answered:
                    _drain()  # flush logs and events while the server still listens
    finally:
        os.environ.pop("PREFECT_API_URL", None)
        os.environ.pop("DPAUDIT_EMBEDDED_API", None)
        server.stop()


def _drain() -> None:
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for w in (APILogWorker, EventsWorker):
        try:
            w.drain_all(timeout=30)
        except Exception:
            pass


def task_runner(
    scheduler: str,
    n_workers: int,
    threads_per_worker: int,
    memory_limit: str,
    connect_timeout: float = CONNECT_TIMEOUT_S,
) -> Any:
    """A DaskTaskRunner for the configured cluster (an external scheduler is checked first)."""
    apply_dask_defaults()
    apply_malloc_defaults()
    if scheduler:
        check_scheduler(scheduler, connect_timeout)
    from flows.runtime.watched_runner import WatchedDaskTaskRunner as runner_cls

    if scheduler:
        return runner_cls(address=scheduler, client_kwargs={"timeout": connect_timeout})
    return runner_cls(
        cluster_kwargs={
            "n_workers": n_workers,
            "threads_per_worker": threads_per_worker,
            "processes": True,
            "memory_limit": memory_limit,
            # loopback only, and a free port: a fixed 8787 clashes with any other cluster here
            "host": LOOPBACK,
            "dashboard_address": f"{LOOPBACK}:0",
        }
    )


def _print_warning(message: str) -> None:
    import sys

    print(f"dpaudit: warning: {message}", file=sys.stderr, flush=True)


@contextmanager
def cluster_runner(cluster: Any, warn: Callable[[str], Any] | None = None) -> Iterator[Any]:
    """A DaskTaskRunner for a ``ClusterSection``: external scheduler, cluster class or local cluster.

    A cluster class is started here (and closed on exit), so bad ``cluster.kwargs`` fail before the
    flow runs, as a one-line :class:`ClusterConfigError` naming them; what Dask logs of the failure
    goes to the run's log file (flows/runtime/runlog.py), not the console. An external scheduler whose
    processes keep Dask's 30 s TCP timeout is named to ``warn``
    (:func:`~flows.runtime.dask_tcp.tcp_timeout_warning`; by default a ``dpaudit: warning:`` line on
    stderr).
    """
    from flows.runtime.watched_runner import WatchedDaskTaskRunner as runner_cls

    apply_dask_defaults()
    apply_malloc_defaults()
    adapt = cluster.adapt.model_dump() if getattr(cluster, "adapt", None) else None
    path = getattr(cluster, "cluster_class", None)
    connect_timeout = float(getattr(cluster, "connect_timeout", CONNECT_TIMEOUT_S))
    if not path:
        runner = task_runner(
            cluster.scheduler,
            cluster.n_workers,
            cluster.threads_per_worker,
            cluster.memory_limit,
            connect_timeout,
        )
        if cluster.scheduler:
            from flows.runtime.part_pool import daemonic_workers_refusal

            refusal = daemonic_workers_refusal(
                cluster.scheduler, getattr(cluster, "fit_processes", 1), connect_timeout
            )
            if refusal:
                raise ClusterConfigError(refusal)
            message = tcp_timeout_warning(cluster.scheduler, connect_timeout)
            if message:
                (warn or _print_warning)(message)
            yield runner
            return
        # a local cluster starts here, not at the flow's first task: while an embedded API boots
        import dask
        from distributed import LocalCluster

        # workers that may start the processes of cluster.fit_processes (flows.runtime.part_pool)
        fit = getattr(cluster, "fit_processes", 1) > 1
        with forked_workers(), dask.config.set({"distributed.worker.daemon": False} if fit else {}):
            local = LocalCluster(**runner.cluster_kwargs)
            try:
                if adapt:
                    local.adapt(**adapt)
                yield runner_cls(cluster=local)
            finally:
                local.close()
        return
    from flows.spec.cluster import import_cluster_class

    given = dict(cluster.kwargs or {})
    try:
        cls = import_cluster_class(path)
        built = cls(**cluster_class_kwargs(cls, given))
    except Exception as exc:
        raise ClusterConfigError(class_failure(path, given, exc)) from None
    try:
        if adapt:
            built.adapt(**adapt)
        yield runner_cls(
            address=built.scheduler_address, client_kwargs={"timeout": connect_timeout}
        )
    finally:
        built.close()


#: what a local worker's tasks import, loaded once by the process the workers are forked from
WORKER_PRELOAD = ("prefect", "prefect.task_engine", "prefect_dask", "flows.audit.tasks")
#: the user's choice of how Dask starts worker processes, which is then kept
_START_METHOD_ENV = "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD"


@contextmanager
def forked_workers() -> Iterator[None]:
    """While open, a local cluster's workers are forked from one server process that has imported
    :data:`WORKER_PRELOAD` (and distributed's own packages), instead of each being spawned and
    importing all of it again: on 2 cores that import is a worker's largest start-up cost, paid
    while the embedded API boots. The server ends when this closes, so that a later cluster of
    the same process forks from one started with its environment (the API's URL). Nothing
    changes where the platform has no ``forkserver`` start method, or where Dask's
    ``distributed.worker.multiprocessing-method`` is set in the environment or to another method
    than its default ``spawn``."""
    import multiprocessing
    from multiprocessing import forkserver

    import dask

    default = dask.config.get("distributed.worker.multiprocessing-method", "spawn") == "spawn"
    if (
        "forkserver" not in multiprocessing.get_all_start_methods()
        or _START_METHOD_ENV in os.environ
        or not default
    ):
        yield
        return
    from distributed.utils import get_mp_context

    server = forkserver._forkserver
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        get_mp_context().set_forkserver_preload(
            [*dict.fromkeys([*getattr(server, "_preload_modules", []), *WORKER_PRELOAD])]
        )
        try:
            yield
        finally:
            _end_forkserver(server)


def _end_forkserver(server: Any) -> None:
    """Stop the workers' forkserver at once: SIGTERM before multiprocessing's own stop, which
    only closes its pipe and waits while the server, having imported Prefect and Dask, unwinds
    its interpreter (≈ 0.9 s of a small run's end on 2 cores). The server holds nothing to
    flush: it only forks, and the workers it forked are closed (or live on without it) by then."""
    import signal

    stop = getattr(server, "_stop", None)
    if stop is None:
        return
    pid = getattr(server, "_forkserver_pid", None)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGTERM)  # its default action: no Python handler, no unwinding
        except OSError:
            pass  # gone already
    stop()


#: task-run states that a finished flow run should not have left behind
_UNFINISHED = ("PENDING", "RUNNING", "SCHEDULED")


def fail_orphaned_task_runs(flow: Any, flow_run: Any, state: Any) -> None:
    """Flow hook (``on_failure``/``on_crashed``): set the run's unfinished task runs to Failed.

    A task that kills its Dask worker (out of memory, a segfault) is retried by Dask on other workers
    until ``KilledWorker``; Prefect never hears of its end and would show it Running for ever. The
    flow waits for its other tasks before failing, so what is unfinished here is exactly those.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        TaskRunFilter,
        TaskRunFilterState,
        TaskRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Failed

    reason = (getattr(state, "message", None) or "the flow run failed").splitlines()[0][:500]
    message = f"the flow run ended ({reason}) while this task had not finished (its worker died?)"
    with get_client(sync_client=True) as client:
        for _ in range(10_000):  # pages of the API's limit; each page leaves the filter once failed
            runs = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run.id])),
                task_run_filter=TaskRunFilter(
                    state=TaskRunFilterState(
                        type=TaskRunFilterStateType(any_=[StateType(t) for t in _UNFINISHED])
                    )
                ),
                limit=200,
            )
            if not runs:
                return
            for tr in runs:
                client.set_task_run_state(tr.id, Failed(message=message), force=True)


def describe_failure(exc: BaseException) -> str:
    """One line for a failed run; a task that killed its workers gets the likely cause and fix."""
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    if type(exc).__name__ == "KilledWorker":
        text += (
            " (a task killed every worker that ran it: out of memory? raise cluster.memory_limit "
            "or make blocks smaller)"
        )
    return text


def worker_count(cluster: Any) -> int:
    """Workers of the cluster a run used, for the store's provenance: counted on an external
    scheduler (0 if it cannot be asked), the spec's ``n_workers`` otherwise."""
    if not cluster.scheduler:
        return int(cluster.n_workers)
    try:
        from distributed import Client

        timeout = float(getattr(cluster, "connect_timeout", CONNECT_TIMEOUT_S))
        with Client(cluster.scheduler, timeout=timeout) as client:
            return len(client.scheduler_info().get("workers", {}))
    except (OSError, TimeoutError):
        return 0


def planned_workers(cluster: Any) -> int:
    """Workers the simulation batches are sized for: ``adapt.maximum`` when adaptive, the workers
    counted on an external scheduler, ``n_workers`` otherwise (at least 1)."""
    adapt = getattr(cluster, "adapt", None)
    if adapt is not None:
        return max(1, int(adapt.maximum))
    if cluster.scheduler:
        return max(1, worker_count(cluster))
    return max(1, int(cluster.n_workers))
