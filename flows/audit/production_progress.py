"""Resume points inside a production TopDown state's replicate, kept in the staging store
(``auditlib.simulate.sparse_progress``): the chunks of whole parents each level was released in,
saved at most once a minute of work (``flows.runtime.cluster.progress_every_s``), so that a killed
run resumes a state part-way instead of from its State level (a large state's DHC replicate is
hours of one core). A finished state's blocks are the resume marker as before; the group is
dropped with the other staging groups before the store is published.

Each save also records what the state's task has cost so far (:class:`Cost`: CPU and wall
seconds, over every run that worked on it), so that a state finished by a resumed run is charged
its whole cost; a finished task keeps its cost in :data:`PRODUCTION_COSTS` until the ``production``
group takes it (``flows.audit.production.production_dataset``).

Kept under ``production_progress/{state}-{replicate}-L{level}-{first chunk}`` (flat: concurrent
tasks make no shared parent group). The store's spec is the resumed run's (a store resumes only
its own spec); a chunk kept by other code of the same spec is taken as it is, as a finished
state's blocks are."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from auditlib.simulate.sparse_progress import Batch, Chunk
from flows.audit import kept_histograms
from flows.runtime.cluster import progress_every_s
from flows.runtime.part_pool import PartPool
from storage.result_store import ResultStore

#: the staging group of the kept chunks
PRODUCTION_PROGRESS = "production_progress"
#: the staging group of the finished tasks' costs: ``{state}-{first replicate}``
PRODUCTION_COSTS = "production_costs"
_COSTS = ("cpu_s", "wall_s", "peak_rss")
_NAMES = ("c0", "c1", "nnz", "iterations", "variables", "keys", "counts")


def _keys(store: ResultStore, group: str) -> list[str]:
    """The entries of a staging group (none if the group is not there)."""
    from zarr.errors import NodeNotFoundError

    try:
        return list(store.zarr_group(group).group_keys())
    except (NodeNotFoundError, FileNotFoundError):
        return []


def kept_points(store: ResultStore) -> int:
    """Resume points kept in the staging store (batches of chunks of unfinished states)."""
    return len(_keys(store, PRODUCTION_PROGRESS))


def create(store: ResultStore) -> None:
    """The (empty) groups, made once by the flow before its tasks write into them."""
    kept_histograms.create(store, PRODUCTION_PROGRESS)
    kept_histograms.create(store, PRODUCTION_COSTS)


def drop(store: ResultStore) -> None:
    """Drop the kept chunks (every block is written: no run needs them again); the costs stay
    until the ``production`` group is written (:func:`drop_costs`)."""
    kept_histograms.drop(store, PRODUCTION_PROGRESS)


def drop_state(store: ResultStore, state: int) -> None:
    """Drop a finished state's kept chunks (its blocks are written: no run resumes it again)."""
    for key in _keys(store, PRODUCTION_PROGRESS):
        if int(key.split("-")[0]) == state:
            store.drop_group(f"{PRODUCTION_PROGRESS}/{key}")


def drop_costs(store: ResultStore) -> None:
    """Drop the kept costs (the ``production`` group holds them)."""
    kept_histograms.drop(store, PRODUCTION_COSTS)


def _peak_rss() -> int:
    """This process's peak resident memory so far, in bytes (Linux: ``ru_maxrss`` in KiB)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


@dataclass
class Cost:
    """A production state task's cost: CPU seconds of its worker process (the task's thread and the
    worker's own, a worker of one thread) and of its fit's ``pool`` of processes if any
    (``flows.runtime.part_pool``), and wall seconds since it started, plus what earlier runs spent
    on the chunks it resumes (:meth:`resume`)."""

    prior_cpu: float = 0.0
    prior_wall: float = 0.0
    t0_cpu: float = field(default_factory=time.process_time)
    t0_wall: float = field(default_factory=time.perf_counter)
    pool: PartPool | None = None

    def now(self) -> dict[str, float]:
        pool_cpu = 0.0 if self.pool is None else self.pool.cpu
        return {
            "cpu_s": self.prior_cpu + time.process_time() - self.t0_cpu + pool_cpu,
            "wall_s": self.prior_wall + time.perf_counter() - self.t0_wall,
        }

    def resume(self, store: ResultStore, state: int, replicates: range) -> Cost:
        """Charge the cost recorded by the latest kept chunks of the state's ``replicates`` (an
        earlier run's work on this task; the work a kill lost after its last save is not
        charged)."""
        for key in _keys(store, PRODUCTION_PROGRESS):
            st, rep = key.split("-")[:2]
            if int(st) == state and int(rep) in replicates:
                attrs = dict(store.zarr_group(f"{PRODUCTION_PROGRESS}/{key}").attrs)
                self.prior_cpu = max(self.prior_cpu, float(str(attrs.get("cpu_s", 0.0))))
                self.prior_wall = max(self.prior_wall, float(str(attrs.get("wall_s", 0.0))))
        return self


def save_cost(store: ResultStore, state: int, r0: int, cost: Cost) -> None:
    """Keep a finished task's cost (state, first replicate) until the ``production`` group; its
    peak memory: the worker's, plus with a pool its processes' largest times their number (an
    upper bound of the two together)."""
    now = cost.now()
    peak = _peak_rss() + (0 if cost.pool is None else cost.pool.processes * cost.pool.peak_rss)
    arrays = {"cost": np.array([now["cpu_s"], now["wall_s"], float(peak)])}
    kept_histograms.save(store, PRODUCTION_COSTS, f"{state}-{r0}", arrays)


def state_costs(store: ResultStore, states: int) -> dict[str, np.ndarray]:
    """Per state, the kept costs of its tasks: CPU and wall seconds summed, the largest peak RSS of
    the worker processes that finished them (NaN: none kept, e.g. a state finished by an older
    run)."""
    out = {k: np.full(states, np.nan) for k in _COSTS}
    for key in _keys(store, PRODUCTION_COSTS):
        got = kept_histograms.load(store, PRODUCTION_COSTS, key, ("cost",))
        if got is None:
            continue
        s = int(key.split("-")[0])
        cpu, wall, rss = (float(v) for v in got["cost"])
        for name, v in (("cpu_s", cpu), ("wall_s", wall)):
            out[name][s] = v if np.isnan(out[name][s]) else out[name][s] + v
        out["peak_rss"][s] = np.fmax(out["peak_rss"][s], rss)
    return out


@dataclass
class StoreProgress:
    """One (state, replicate)'s chunks in the staging store (``auditlib.simulate.sparse_progress
    .Progress``)."""

    store: ResultStore
    state: int
    replicate: int
    every: float = field(default_factory=progress_every_s)
    cost: Cost | None = None

    def _prefix(self, level: int) -> str:
        return f"{self.state}-{self.replicate}-L{level}-"

    def save(self, batches: Sequence[Batch]) -> None:
        for b in batches:
            cs = b.chunks
            arrays = {
                "c0": np.array([c.c0 for c in cs], np.int64),
                "c1": np.array([c.c1 for c in cs], np.int64),
                "nnz": np.array([c.keys.size for c in cs], np.int64),
                "iterations": np.array([c.iterations for c in cs], np.int64),
                "variables": np.array([c.variables for c in cs], np.int64),
                "keys": np.concatenate([c.keys for c in cs]).astype(np.int64),
                "counts": np.concatenate([c.counts for c in cs]).astype(np.int64),
            }
            kept_histograms.save(
                self.store,
                PRODUCTION_PROGRESS,
                f"{self._prefix(b.level)}{b.first}",
                arrays,
                {
                    "rng_state": json.dumps(b.rng_state),
                    **({} if self.cost is None else self.cost.now()),
                },
            )

    def load(self, level: int) -> list[Batch]:
        prefix = self._prefix(level)
        out = []
        for key in sorted(
            k for k in _keys(self.store, PRODUCTION_PROGRESS) if k.startswith(prefix)
        ):
            got = kept_histograms.load(self.store, PRODUCTION_PROGRESS, key, _NAMES)
            if got is None:
                continue  # not kept whole (the run was killed while saving it)
            attrs = self.store.zarr_group(f"{PRODUCTION_PROGRESS}/{key}").attrs
            state = json.loads(str(attrs["rng_state"]))
            ends = np.cumsum(got["nnz"])
            cols = zip(
                got["c0"].tolist(), got["c1"].tolist(), got["nnz"].tolist(), ends.tolist(),
                got["iterations"].tolist(), got["variables"].tolist(), strict=True,
            )  # fmt: skip
            chunks = [
                Chunk(a, b, got["keys"][e - n : e], got["counts"][e - n : e], i, v)
                for a, b, n, e, i, v in cols
            ]
            out.append(Batch(level, int(key[len(prefix) :]), chunks, state))
        return out
