"""Resume points inside one sparse TopDown run (:func:`~auditlib.simulate.sparse_topdown
.sparse_topdown`): the chunks of whole parents a level was released in, kept as they finish, so
that a run stopped part-way (a killed worker, a lost machine) starts again after the last chunk
kept instead of from the State. A large state's DHC replicate is hours of one core; without these
points a kill an hour before its end loses all of it.

What is kept of a chunk is what the run goes on from: its released cells (sorted keys and counts),
its fit's iterations and variables, and the level's noise generator's state after it, so a resumed
run draws the same noise for the chunks left and releases exactly what an unbroken run releases
(``tests/unit/test_sparse_progress.py``). Chunks are saved in batches, at most one per ``every``
seconds of work (a small state's run saves nothing), every level's pending chunks in level order, so
the chunks kept of a level always start at its first and a level is kept whole before any of the
next. Kept chunks are checked against the ranges the resumed run cuts; the first that differs ends
the level's kept prefix (it and everything after are released again).

:class:`MemoryProgress` keeps them in a dict (tests, notebooks); the audit flow keeps them in its
staging store (``flows.audit.production_progress``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Chunk:
    """One released chunk: the children ``[c0, c1)`` (the State: ``(0, 1)``), the sorted keys
    ``child · n_cells + cell`` and counts of their non-zero cells, the fit's iterations and its
    variables."""

    c0: int
    c1: int
    keys: IntArray
    counts: IntArray
    iterations: int
    variables: int


@dataclass(frozen=True)
class Batch:
    """Consecutive chunks of one level from its ``first``-th, and the level's generator's state
    after the last of them (``numpy.random.BitGenerator.state``)."""

    level: int
    first: int
    chunks: list[Chunk]
    rng_state: dict[str, Any]


class Progress(Protocol):
    """Where one run's chunks are kept: ``every`` seconds of work at most between saves."""

    every: float

    def save(self, batches: Sequence[Batch]) -> None:
        """Keep the batches (in level order; each level's after those kept before)."""

    def load(self, level: int) -> list[Batch]:
        """The level's kept batches, in any order (a stale run's may start where another's does:
        :func:`kept_prefix` takes those that match)."""


def kept_prefix(
    batches: Sequence[Batch], ranges: Sequence[tuple[int, int]]
) -> tuple[list[Chunk], dict[str, Any] | None]:
    """The level's kept chunks that match ``ranges`` from the first on, consecutive, and the
    generator's state after the last of them (``None``: nothing kept)."""
    chunks: list[Chunk] = []
    state: dict[str, Any] | None = None
    while True:
        n = len(chunks)
        fits = [
            b
            for b in batches
            if b.first == n
            and b.chunks
            and n + len(b.chunks) <= len(ranges)
            and all((c.c0, c.c1) == ranges[n + k] for k, c in enumerate(b.chunks))
        ]
        if not fits:
            return chunks, state
        chunks += fits[0].chunks
        state = fits[0].rng_state


@dataclass
class MemoryProgress:
    """Chunks kept in memory: ``saves`` counts the batches saved, ``stop_after`` (if set) raises
    :class:`Stopped` once that many were saved (a run killed part-way, for tests)."""

    every: float = 0.0
    stop_after: int | None = None
    kept: dict[int, list[Batch]] = field(default_factory=dict)
    saves: int = 0

    def save(self, batches: Sequence[Batch]) -> None:
        for b in batches:
            self.kept.setdefault(b.level, []).append(b)
            self.saves += 1
            if self.stop_after is not None and self.saves >= self.stop_after:
                raise Stopped(f"stopped after {self.saves} saved batches")

    def load(self, level: int) -> list[Batch]:
        return list(self.kept.get(level, []))

    def chunks(self) -> int:
        """Chunks kept over all levels."""
        return sum(len(b.chunks) for bs in self.kept.values() for b in bs)


class Stopped(RuntimeError):
    """A run stopped on purpose by :class:`MemoryProgress` (``stop_after``)."""


def concat(chunks: Sequence[Chunk]) -> tuple[IntArray, IntArray]:
    """The chunks' keys and counts, in order (the level's, when the chunks are all of it)."""
    if not chunks:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return (
        np.concatenate([c.keys for c in chunks]).astype(np.int64),
        np.concatenate([c.counts for c in chunks]).astype(np.int64),
    )
