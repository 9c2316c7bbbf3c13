"""The shared chunked run (``flows.experiments.chunked``) where it submits no task: a run killed after writing
its group, before removing the parts, and parts with a chunk not marked done."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from auditlib.exceptions import StoreError
from flows.experiments.chunked import Chunk, ChunkedRun, repetition_chunks, run_chunked
from storage import store

LAYOUT = {"x": ((4,), (2,), "float64")}
RUN_ID = "0123456789abcdef"


def run(url: str, chunks: list[Chunk], run_id: str = RUN_ID) -> ChunkedRun:
    """``run_chunked`` of the group ``final`` from ``parts`` (4 values in 2 chunks), with neither a
    task nor an assembly: these runs must submit and assemble nothing."""

    def no_assembly(parts: dict[str, np.ndarray]) -> xr.Dataset:
        raise AssertionError("assembled")

    return run_chunked(url, run_id, "final", "parts", LAYOUT, (2,), chunks, None, no_assembly)


def test_repetition_chunks_cover_every_repetition_once() -> None:
    assert repetition_chunks(25, 10) == [(0, 10), (10, 20), (20, 25)]
    assert repetition_chunks(20, 10) == [(0, 10), (10, 20)]
    assert repetition_chunks(3, 10) == [(0, 3)]


def test_a_written_group_is_kept_and_its_parts_removed(tmp_path: Path) -> None:
    url = str(tmp_path / "s.zarr")
    store.claim_staging(url, RUN_ID)
    store.chunk_parts(url, "parts", LAYOUT, (2,))
    ds = xr.Dataset({"x": (("i",), np.arange(4.0))})
    store.write_group(url, "final", ds)
    chunks = [Chunk((i,), f"c{i}", (i,)) for i in range(2)]
    done = run(url, chunks)
    assert (done.total, done.computed, done.resumed, done.dataset) == (2, 0, 2, None)
    assert store.groups(url) == ["final"]
    with pytest.raises(StoreError, match="different command"):
        run(url, chunks, "fedcba9876543210")


def test_a_chunk_not_marked_done_fails_the_run(tmp_path: Path) -> None:
    url = str(tmp_path / "s.zarr")
    store.claim_staging(url, RUN_ID)
    store.chunk_parts(url, "parts", LAYOUT, (2,))
    store.write_part(url, "parts", (0,), {"x": ((slice(0, 2),), np.ones(2))})
    done = [Chunk((0,), "c0", ())]  # the only chunk given is done: nothing is submitted
    with pytest.raises(StoreError, match="chunks of 'parts' are missing"):
        run(url, done)
    assert store.groups(url) == ["parts"]
