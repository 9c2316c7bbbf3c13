"""The resumable chunked run shared by the experiment flows (mpl-coverage, fdp-coverage, direct,
sweep), and the run id every run's store records.

A run's store is claimed under its run id (:func:`run_id_of`); its work is cut into chunks, each
with a done-marker in a grid. The run creates (or, resumed, reopens) a staging group of parts: one
array per stored quantity, chunked so that each chunk of work writes its own region. Each chunk's
Prefect task runs on the task runner's Dask cluster and writes its region of the parts with
``ResultStore.write_part`` (its marker last). A re-run on the same store submits only the
chunks not marked done; once every chunk is done the parts are assembled into the final group,
which is written whole, and the parts are removed. A run killed after that write, before the parts
were removed, only removes them when run again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from auditlib.exceptions import StoreError
from flows.runtime import deadline
from storage.result_store import ResultStore
from storage.store import PART_DONE

#: a parts group's layout: array name -> (shape, chunks, dtype), as :func:`store.chunk_parts` takes
PartsLayout = Mapping[str, tuple[tuple[int, ...], tuple[int, ...], str]]


def run_id_of(key: Any) -> str:
    """The run id of the parameters ``key`` (JSON-able: lists, dicts, numbers, strings; anything
    else by its ``str``): the first 16 hex digits of the sha256 of its JSON, keys sorted.

    Every run id a store records comes from here; the caller chooses what goes into ``key`` (what
    determines the numbers and the chunking, not where the store goes or what it runs on)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Chunk:
    """One chunk of work: its place in the marker grid, the name of its task run, and the task's
    arguments after the store."""

    marker: tuple[int, ...]
    label: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class ChunkedRun:
    """What a chunked run did: chunks in all, computed by this run, found done (resumed); and the
    final group it wrote (None when an earlier run had written it already)."""

    total: int
    computed: int
    resumed: int
    dataset: xr.Dataset | None

    def counts(self) -> dict[str, int]:
        """The flow summary's counts: ``tasks`` (chunks in all), ``computed``, ``resumed``."""
        return {"tasks": self.total, "computed": self.computed, "resumed": self.resumed}


def repetition_chunks(repetitions: int, chunk: int) -> list[tuple[int, int]]:
    """(start, stop) of each chunk of ``chunk`` repetitions (the last may be shorter)."""
    return [(start, min(start + chunk, repetitions)) for start in range(0, repetitions, chunk)]


def grid_chunks(
    mechanisms: Sequence[str],
    values: Sequence[float],
    ranges: Sequence[tuple[int, int]],
    label: Callable[[str, float, int, int], str],
    settings: Any,
) -> list[Chunk]:
    """One chunk per (mechanism, value, repetition range) of a coverage experiment: marker
    (mechanism, value, range) and task arguments ``(name, value, start, stop, (mi, vi), ci,
    settings)``; ``label(name, value, start, stop)`` names its task run."""
    return [
        Chunk(
            (mi, vi, ci),
            label(name, v, start, stop),
            (name, v, start, stop, (mi, vi), ci, settings),
        )
        for mi, name in enumerate(mechanisms)
        for vi, v in enumerate(values)
        for ci, (start, stop) in enumerate(ranges)
    ]


def run_chunked(
    store: ResultStore | str,
    run_id: str,
    group: str,
    parts: str,
    layout: PartsLayout,
    grid: tuple[int, ...],
    chunks: Iterable[Chunk],
    task: Any,
    assemble: Callable[[dict[str, np.ndarray]], xr.Dataset],
    what: str = "chunks",
) -> ChunkedRun:
    """Run ``chunks`` resumably into ``store`` (or the store at a URL) and write its group ``group``.

    ``run_id``: the store is claimed for it (another run's unfinished store is refused);
    ``parts``: the staging group, laid out as ``layout`` with done-markers of shape ``grid``;
    ``task``: the Prefect task run per chunk as ``task(store, *chunk.args)``, which writes that
    chunk's values and its marker to ``parts``; ``assemble``: the final group from every array of
    the parts (``store.read_parts``). ``what`` names the chunks in the error raised when some are
    missing after the run."""
    store = ResultStore.of(store)
    store.claim_staging(run_id)
    chunks = list(chunks)
    total = int(np.prod(grid))
    if store.group_complete(group):  # killed after assembling, before removing the parts
        if parts in store.groups():
            store.drop_group(parts)
        return ChunkedRun(total=total, computed=0, resumed=total, dataset=None)
    done = store.chunk_parts(parts, layout, grid)
    futures = [
        task.with_options(task_run_name=c.label).submit(store, *c.args)
        for c in chunks
        if c.marker not in done
    ]
    for f in deadline.as_completed(futures):  # the flow's timeout kept by the clock too
        f.result()
    values = store.read_parts(parts)
    if not values[PART_DONE].all():
        raise StoreError(f"{store.url!r}: {what} of {parts!r} are missing after the run")
    ds = assemble(values)
    store.write_group(group, ds)
    store.drop_group(parts)
    return ChunkedRun(total=total, computed=len(futures), resumed=len(done), dataset=ds)
