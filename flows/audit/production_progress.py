"""Resume points inside a production TopDown state's replicate, kept in the staging store
(``auditlib.simulate.sparse_progress``): the chunks of whole parents each level was released in,
saved at most once a minute of work (``flows.runtime.cluster.progress_every_s``), so that a killed run resumes a state part-way instead of
from its State level (a large state's DHC replicate is hours of one core). A finished state's
blocks are the resume marker as before; the group is dropped with the other staging groups before
the store is published.

Kept under ``production_progress/{state}-{replicate}-L{level}-{first chunk}`` (flat: concurrent
tasks make no shared parent group). The store's spec is the resumed run's (a store resumes only
its own spec); a chunk kept by other code of the same spec is taken as it is, as a finished
state's blocks are."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from auditlib.simulate.sparse_progress import Batch, Chunk
from flows.audit import kept_histograms
from flows.runtime.cluster import progress_every_s
from storage.result_store import ResultStore

#: the staging group of the kept chunks
PRODUCTION_PROGRESS = "production_progress"
_NAMES = ("c0", "c1", "nnz", "iterations", "variables", "keys", "counts")


def kept_points(store: ResultStore) -> int:
    """Resume points kept in the staging store (batches of chunks of unfinished states)."""
    from zarr.errors import NodeNotFoundError

    try:
        return sum(1 for _ in store.zarr_group(PRODUCTION_PROGRESS).group_keys())
    except (NodeNotFoundError, FileNotFoundError):
        return 0


def create(store: ResultStore) -> None:
    """The (empty) group, made once by the flow before its tasks write into it."""
    kept_histograms.create(store, PRODUCTION_PROGRESS)


def drop(store: ResultStore) -> None:
    """Drop the group (every block is written: no run needs it again)."""
    kept_histograms.drop(store, PRODUCTION_PROGRESS)


@dataclass
class StoreProgress:
    """One (state, replicate)'s chunks in the staging store (``auditlib.simulate.sparse_progress
    .Progress``)."""

    store: ResultStore
    state: int
    replicate: int
    every: float = field(default_factory=progress_every_s)

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
                {"rng_state": json.dumps(b.rng_state)},
            )

    def load(self, level: int) -> list[Batch]:
        from zarr.errors import NodeNotFoundError

        try:
            grp = self.store.zarr_group(PRODUCTION_PROGRESS)
        except (NodeNotFoundError, FileNotFoundError):
            return []
        prefix = self._prefix(level)
        out = []
        for key in sorted(k for k in grp.group_keys() if k.startswith(prefix)):
            got = kept_histograms.load(self.store, PRODUCTION_PROGRESS, key, _NAMES)
            if got is None:
                continue  # not kept whole (the run was killed while saving it)
            state = json.loads(str(grp[key].attrs["rng_state"]))
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
