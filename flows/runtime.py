"""Where the flow runs: the Prefect API it reports to and the Dask cluster its tasks run on.

- No ``PREFECT_API_URL``: one embedded API server is started up front and its URL exported, so every
  Dask worker process reports to it (instead of each starting its own); logs are drained before it stops.
- ``cluster.scheduler`` empty: a local Dask cluster of processes; otherwise that scheduler, checked to be
  reachable before anything is written.
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


def apply_prefect_defaults() -> None:
    for k, v in PREFECT_DEFAULTS.items():
        os.environ.setdefault(k, v)


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
            f"Prefect API (PREFECT_API_URL={url})",
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
            "dashboard_address": None,
        }
    )
