"""Progress of a running flow, reported to whoever listens (the CLI's progress bar or log lines).

Two kinds of events: :func:`report` (``done`` of ``total``, what is being done: a progress bar's
update) and :func:`stage` (a stage of the run started or ended, one sentence: ``"epl done (3.1 s)"``,
a logged run's line). The listeners live in this module's state, not in the flow's globals, so
nothing unpicklable (a live terminal display holds locks) is ever captured when Prefect ships the
flow's context to Dask workers.

A simulation task holds a batch of blocks, so the audit's progress counts blocks as their
done-markers land in the store (:class:`BlockProgress` polls them), plus the other tasks.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping

from flows.runtime.background import BackgroundThread

Listener = Callable[[int, int, str], None]
StageListener = Callable[[str], None]
_listener: list[Listener] = []
_stage_listener: list[StageListener] = []

#: seconds between two looks at the store's block done-markers (one look: ~0.06 CPU-s on the
#: full-US spine store's 312 regions)
POLL_S = 5.0


def listen(listener: Listener | None, on_stage: StageListener | None = None) -> None:
    """Send progress updates to ``listener`` and stage messages to ``on_stage`` (``None``: to no
    one) from now on."""
    _listener.clear()
    _stage_listener.clear()
    if listener is not None:
        _listener.append(listener)
    if on_stage is not None:
        _stage_listener.append(on_stage)


def report(done: int, total: int, what: str) -> None:
    for fn in _listener:
        fn(done, total, what)


def stage(message: str) -> None:
    """A stage of the run started or ended: ``message`` is one short sentence without a full stop."""
    for fn in _stage_listener:
        fn(message)


def seconds(t: float) -> str:
    """A stage's duration as its message gives it: ``"0.4 s"``, ``"12 s"``, ``"3 min 05 s"``."""
    if t < 10:
        return f"{t:.1f} s"
    if t < 600:
        return f"{t:.0f} s"
    m, sec = divmod(round(t), 60)
    return f"{m} min {sec:02d} s"


def cluster_started() -> None:
    """Announce the running flow's Dask cluster (``cluster started (local, 2 workers)``), when
    someone listens and its task runner has started it (Prefect starts it with the first task
    submitted: :class:`BlockProgress` calls this once the flow's tasks are submitted). Reads only
    what the runner holds: no call to the scheduler."""
    if not _stage_listener:
        return
    try:
        from prefect.context import FlowRunContext

        ctx = FlowRunContext.get()
        runner = ctx.task_runner if ctx is not None else None
        client = getattr(runner, "_client", None)  # a DaskTaskRunner's, once started
        if client is None:
            return
        cluster = getattr(runner, "_cluster", None)
        workers = len(getattr(cluster, "workers", None) or {})
        address = getattr(runner, "address", None) or "?"
    except Exception:
        return
    if cluster is None:
        stage(f"cluster started (scheduler {address})")
        return
    kind = "local" if type(cluster).__name__ == "LocalCluster" else type(cluster).__name__
    stage(f"cluster started ({kind}, {workers} worker{'' if workers == 1 else 's'})")


class BlockProgress(BackgroundThread):
    """Reports ``blocks simulated k/n, tasks j/m`` while a flow waits for its tasks.

    ``count_blocks()`` says how many of the ``n_blocks`` blocks are finished (it reads the store);
    a background thread asks it every :data:`POLL_S` seconds while listeners are attached and
    simulation tasks (``n_sim`` of them) are running, and :meth:`task_done` counts finished tasks
    (a finished simulation task also re-reads the blocks). An error reading the store only skips
    that update.

    Stages: ``simulate: n/n blocks done (40 s)`` once every simulation task is done, and
    ``<name> done (3.1 s)`` once the ``stages[name]`` other tasks of that name are (times from the
    start of the wait).
    """

    def __init__(
        self,
        count_blocks: Callable[[], int],
        n_blocks: int,
        n_sim: int,
        n_other: int,
        stages: Mapping[str, int] | None = None,
        planned_blocks: int | None = None,
    ) -> None:
        self._count = count_blocks
        self.n_blocks, self.n_sim, self.n_other = n_blocks, n_sim, n_other
        self.blocks = self.other = self.sims = 0
        self._stages = dict(stages or {})
        #: the plan's blocks (None: unknown): a plan with none simulates nothing, resumed or not
        self.planned_blocks = planned_blocks
        self._stage_done: Counter[str] = Counter()
        super().__init__()
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    def __enter__(self) -> BlockProgress:
        cluster_started()
        self._t0 = time.perf_counter()
        if not self.n_sim and self.planned_blocks != 0:
            stage("simulate: no block left to simulate (resumed)")
        if _listener and self.n_blocks:
            self._start_thread(self._poll, "block-progress")
        return self

    def _poll(self) -> None:
        while not self._stop.wait(POLL_S) and self.sims < self.n_sim:
            self._refresh()

    def _refresh(self) -> None:
        if not _listener:
            return
        try:
            n = self._count()
        except Exception:  # a chunk being written right now: try again next time
            return
        with self._lock:
            self.blocks = max(self.blocks, min(n, self.n_blocks))
            self._report()

    def task_done(self, sim: bool, stage_name: str | None = None) -> None:
        """One task finished: a simulation task (``sim``) or another, of stage ``stage_name``."""
        if sim:
            self.sims += 1
            self._refresh()
        with self._lock:
            self.other += 0 if sim else 1
            self._report()
        took = seconds(time.perf_counter() - self._t0)
        if sim and self.sims == self.n_sim:  # as the store says (a failed read: the last count)
            stage(f"simulate: {self.blocks}/{self.n_blocks} blocks done ({took})")
        if stage_name is not None:
            self._stage_done[stage_name] += 1
            if self._stage_done[stage_name] == self._stages.get(stage_name):
                stage(f"{stage_name} done ({took})")

    def _report(self) -> None:
        what = f"blocks simulated {self.blocks}/{self.n_blocks}, tasks {self.other}/{self.n_other}"
        report(self.blocks + self.other, self.n_blocks + self.n_other, what)
