"""Where the flow runs: the Prefect API it reports to and the Dask cluster its tasks run on.

- No ``PREFECT_API_URL``: one embedded API server is started up front and its URL exported, so every
  Dask worker process reports to it (instead of each starting its own); logs are drained before it stops.
- ``cluster.scheduler`` empty: a local Dask cluster of processes; otherwise that scheduler, checked to be
  reachable before anything is written. ``cluster.class``: that cluster class (by import path) built
  with ``cluster.kwargs`` before the flow starts, so a class that cannot start is a configuration error.
- A failed flow run leaves no task run Running in the API (:func:`fail_orphaned_task_runs`): a task
  whose worker died on every attempt (Dask's ``KilledWorker``) never reports its end to Prefect.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlparse

from auditlib.exceptions import DPAuditError

#: settings that must be in place before Prefect is imported (see docs/stack.md)
PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    # keep the terminal for the progress bar: Dask's scheduler and nanny chatter at warning level
    "DASK_LOGGING__DISTRIBUTED": "warning",
}


class ClusterUnreachableError(DPAuditError, ConnectionError):
    """The configured Dask scheduler or Prefect API does not answer."""


class ClusterConfigError(DPAuditError, ValueError):
    """The configured Dask cluster class cannot be built with its kwargs."""


def apply_prefect_defaults() -> None:
    for k, v in PREFECT_DEFAULTS.items():
        os.environ.setdefault(k, v)


def redact_url(url: str) -> str:
    """``url`` without credentials (``user:password@``), for messages and logs."""
    u = urlparse(url)
    if u.username is None and u.password is None:
        return url
    host = u.hostname or ""
    netloc = f"***@{host}" + (f":{u.port}" if u.port else "")
    return u._replace(netloc=netloc).geturl()


def check_reachable(address: str, what: str, fix: str, timeout: float = 5.0) -> None:
    """Open (and close) a TCP connection to ``address`` or raise a clear error."""
    u = urlparse(address if "://" in address else f"tcp://{address}")
    host, port = u.hostname, u.port
    if not host or not port:
        raise ClusterUnreachableError(f"{what} address {address!r} has no host:port; {fix}")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise ClusterUnreachableError(
            f"{what} at {address!r} is unreachable ({exc.strerror or exc}); {fix}"
        ) from None


@contextmanager
def prefect_api(startup_timeout: int = 120) -> Iterator[str]:
    """Yield the Prefect API URL: the configured one, or one embedded server for this process."""
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
        yield url
        return
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL, temporary_settings

    server = SubprocessASGIServer()
    server.start(timeout=startup_timeout)
    os.environ["PREFECT_API_URL"] = server.api_url
    os.environ["DPAUDIT_EMBEDDED_API"] = server.api_url
    try:
        with temporary_settings({PREFECT_API_URL: server.api_url}):
            try:
                yield server.api_url
            finally:
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


def task_runner(scheduler: str, n_workers: int, threads_per_worker: int, memory_limit: str) -> Any:
    """A DaskTaskRunner for the configured cluster (checked to be reachable first)."""
    from prefect_dask import DaskTaskRunner

    if scheduler:
        check_reachable(
            scheduler,
            "Dask scheduler",
            'start one (`dask scheduler`) or set cluster.scheduler = "" for a local cluster',
        )
        return DaskTaskRunner(address=scheduler)
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": n_workers,
            "threads_per_worker": threads_per_worker,
            "processes": True,
            "memory_limit": memory_limit,
            # loopback only, and a free port: a fixed 8787 clashes with any other cluster here
            "host": "127.0.0.1",
            "dashboard_address": "127.0.0.1:0",
        }
    )


@contextmanager
def cluster_runner(cluster: Any) -> Iterator[Any]:
    """A DaskTaskRunner for a ``ClusterSection``: external scheduler, cluster class or local cluster.

    A cluster class is started here (and closed on exit), so bad ``cluster.kwargs`` fail before the
    flow runs, as a :class:`ClusterConfigError` naming them.
    """
    from prefect_dask import DaskTaskRunner

    adapt = cluster.adapt.model_dump() if getattr(cluster, "adapt", None) else None
    path = getattr(cluster, "cluster_class", None)
    if not path:
        runner = task_runner(
            cluster.scheduler, cluster.n_workers, cluster.threads_per_worker, cluster.memory_limit
        )
        if adapt and not cluster.scheduler:
            runner.adapt_kwargs = adapt
        yield runner
        return
    from flows.spec.cluster import import_cluster_class

    kwargs = dict(cluster.kwargs or {})
    try:
        cls = import_cluster_class(path)
        built = cls(**kwargs)
    except Exception as exc:
        raise ClusterConfigError(
            f"cluster.class = {path!r} did not start with cluster.kwargs = {kwargs!r} "
            f"({type(exc).__name__}: {exc}); fix cluster.kwargs (see that class's documentation)"
        ) from None
    try:
        if adapt:
            built.adapt(**adapt)
        yield DaskTaskRunner(address=built.scheduler_address)
    finally:
        built.close()


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

        with Client(cluster.scheduler, timeout=10) as client:
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
