"""A run whose Dask cluster has no worker left fails within ``cluster.lost_workers_grace_s``.

Dask keeps a task waiting for a worker for ever: when every worker of a run's cluster is gone (their
nannies killed with them, an external cluster whose workers all left, a Slurm job past its wall
time, workers dropped by the scheduler), the flow would wait for ``cluster.timeout_s``.

:class:`WorkerWatch` is a thread of the run's process, beside the flow. It asks the scheduler of the
flow's Dask client (its task runner's: flows/runtime/watched_runner.py) for its workers every
:data:`POLL_S` seconds. Once it has seen a worker, a cluster with none for ``grace_s`` seconds is
lost: the watch cancels the client's futures (the flow fails at once: the tasks it waits for raise
``CancelledError``) and :attr:`WorkerWatch.lost` says what happened. A nanny restarting a killed
worker within the grace period, or a cluster that has not started its first worker yet (a batch job
still queued), is no alarm. An adaptive cluster that may scale to no worker (``adapt.minimum = 0``)
is not watched.
"""

from __future__ import annotations

import re
import time
import weakref
from datetime import UTC, datetime
from typing import Any

from flows.runtime.background import BackgroundThread

#: seconds between two questions to the scheduler
POLL_S = 1.0
#: seconds a question to the scheduler may take before it counts as unanswered
ASK_TIMEOUT_S = 10.0


#: what the scheduler's stimulus for removing a worker means
REASONS = {
    "handle-worker-cleanup": "its connection closed: killed, out of memory, crashed or cut off",
    "check-worker-ttl": "no heartbeat within distributed.scheduler.worker-ttl",
}


class AllWorkersLostError(RuntimeError):
    """The run's cluster had no worker for ``cluster.lost_workers_grace_s`` seconds."""


def watched(cluster: Any) -> bool:
    """Whether a run on ``cluster`` (a ``ClusterSection``) is watched: not an adaptive cluster
    that may scale to no worker."""
    adapt = getattr(cluster, "adapt", None)
    return adapt is None or int(adapt.minimum) > 0


class WorkerWatch(BackgroundThread):
    """Watch the workers of the current Dask client's cluster while the ``with`` block runs."""

    def __init__(self, grace_s: float, enabled: bool = True, poll_s: float = POLL_S) -> None:
        super().__init__()
        self.grace_s = float(grace_s)
        self.enabled = enabled
        self.poll_s = poll_s
        #: what was lost, in words (None while the cluster has a worker or is not watched)
        self.lost: str | None = None

    def __enter__(self) -> WorkerWatch:
        if self.enabled:
            self._start_thread(self._run, "worker-watch")
        return self

    def _join_timeout(self) -> float:
        return ASK_TIMEOUT_S + self.poll_s

    def _run(self) -> None:
        client: Any = None
        empty_since: float | None = None
        while not self._stop.wait(self.poll_s):
            current = _current_client()
            if current is None:
                continue
            if current is not client:  # a new cluster: start over
                client, empty_since = current, None
            workers = _workers(client)
            if workers is None:  # no answer: not evidence of a lost cluster
                continue
            now = time.monotonic()
            if workers:
                empty_since = None
                continue
            if empty_since is None:
                empty_since = now
            if now - empty_since < self.grace_s:
                continue
            if self.lost is None:
                history = _history(client)
                if history is None or history.added == 0:  # no worker yet: a cluster starting
                    continue
                self.lost = history.words(client, self.grace_s)
            _cancel_all(client, self.lost)  # again each time: what the flow submits after


class _History:
    """The scheduler's record of its workers (its ``all`` events): how many were added, the most
    it had at once, and the last one removed (when, and the scheduler's stimulus for it)."""

    def __init__(self, events: list[tuple[float, dict[str, Any]]]) -> None:
        self.added = 0
        self.peak = 0
        self.last: tuple[float, str, str] | None = None
        present: set[str] = set()
        for stamp, msg in events:
            action = msg.get("action") if isinstance(msg, dict) else None
            worker = str(msg.get("worker", "?")) if isinstance(msg, dict) else "?"
            if action == "add-worker":
                self.added += 1
                present.add(worker)
                self.peak = max(self.peak, len(present))
            elif action == "remove-worker":
                present.discard(worker)
                stimulus = re.sub(r"-[0-9.]+$", "", str(msg.get("stimulus_id", "")))
                self.last = (float(stamp), worker, REASONS.get(stimulus, stimulus))

    def words(self, client: Any, grace_s: float) -> str:
        address = getattr(getattr(client, "scheduler", None), "address", None) or "?"
        n = max(self.peak, 1)
        last = ""
        if self.last is not None:
            stamp, worker, why = self.last
            at = datetime.fromtimestamp(stamp, UTC).strftime("%H:%M:%S UTC")
            last = f" (last: {worker} at {at}{f', {why}' if why else ''})"
        return (
            f"{'the' if n == 1 else f'all {n}'} worker{'s' if n != 1 else ''} of the Dask "
            f"cluster at {address} {'was' if n == 1 else 'were'} lost{last} and none came back "
            f"within cluster.lost_workers_grace_s = {grace_s:g} s"
        )


def _history(client: Any) -> _History | None:
    try:
        events = client.sync(_events, client, callback_timeout=ASK_TIMEOUT_S)
    except Exception:
        return None
    return _History(list(events))


async def _events(client: Any) -> Any:
    return await client.scheduler.events(topic="all")


#: the Dask clients of this process's task runners (Prefect keeps them out of Dask's registry)
_clients: weakref.WeakSet[Any] = weakref.WeakSet()


def track_client(client: Any) -> None:
    """Watch ``client`` (a task runner's, flows/runtime/watched_runner.py) while it runs."""
    _clients.add(client)


def _current_client() -> Any:
    """The running client of this process's task runner (the latest started), if any."""
    running = [c for c in list(_clients) if getattr(c, "status", None) == "running"]
    return running[-1] if running else None


def _workers(client: Any) -> set[str] | None:
    """Addresses of the scheduler's workers; None if the scheduler does not answer in time."""
    try:
        return set(client.sync(_ask, client, callback_timeout=ASK_TIMEOUT_S))
    except Exception:
        return None


async def _ask(client: Any) -> dict[str, int]:
    result: dict[str, int] = await client.scheduler.ncores()
    return result


def _cancel_all(client: Any, reason: str) -> None:
    """Cancel every future of ``client``: what the flow waits for ends at once."""
    try:
        from distributed import Future

        keys = list(client.futures)
        if keys:
            futures: list[Any] = [Future(k, client) for k in keys]
            client.cancel(futures, force=True, reason="all workers lost", msg=reason)
    except Exception:
        pass  # the client closed meanwhile: the flow is ending anyway


def run_watched(flow: Any, args: tuple[Any, ...], cluster: Any) -> Any:
    """The final state of ``flow(*args)``, its cluster's workers watched: :class:`AllWorkersLostError`
    if none was left for ``cluster.lost_workers_grace_s`` seconds (``cluster``: a
    ``ClusterSection``). What ``dpaudit run`` and its kin and a served run (flows/audit/scheduled.py) call."""
    state = None
    with WorkerWatch(cluster.lost_workers_grace_s, enabled=watched(cluster)) as watch:
        try:
            state = flow(*args, return_state=True)
        except Exception:
            if watch.lost is None:
                raise
    if watch.lost is not None and (state is None or not state.is_completed()):
        if state is not None and failed_before_the_loss(state.result(raise_on_failure=False)):
            return state  # its own failure is the cause: a task that killed its workers
        raise AllWorkersLostError(watch.lost)
    return state


def failed_before_the_loss(exc: object) -> bool:
    """Whether a flow that failed with ``exc`` while its cluster had no worker failed of its own:
    Dask's ``KilledWorker`` (a task killed every worker that ran it) is raised before the flow
    waits for its other tasks, which the watch then cancels once no worker came back."""
    return type(exc).__name__ == "KilledWorker"
