"""A zarr write interrupted in the calling thread goes on in zarr's own thread; removing a staged
store first waits for it (storage/pending_io.py), so a failed run's copy is not written again, in
part, after it was removed."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr

from storage.pending_io import settle
from storage.result_store import ResultStore
from tests.unit.test_result_store import _template

SHAPE, CHUNK = (1000, 1000), (50, 50)
N_CHUNKS = (SHAPE[0] // CHUNK[0]) * (SHAPE[1] // CHUNK[1])


class Interrupted(Exception):
    """What the alarm raises in the main thread (as the flow's timeout does)."""


@pytest.fixture
def alarm() -> Iterator[None]:
    def raise_(*_: object) -> None:
        raise Interrupted

    old = signal.signal(signal.SIGALRM, raise_)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def chunk_files(where: Path) -> int:
    return sum(1 for p in where.rglob("c/*/*") if p.is_file())


def interrupted_write(group: str, name: str) -> None:
    """A write of :data:`N_CHUNKS` chunks into a new array ``name`` of the group at ``group``,
    interrupted by the alarm part-way (the alarm comes sooner until it does)."""
    data = np.random.default_rng(0).random(SHAPE)
    for i, after in enumerate((0.02, 0.01, 0.005, 0.002)):
        array = zarr.open_group(group, mode="a").create_array(
            f"{name}{i}", shape=SHAPE, chunks=CHUNK, dtype="f8"
        )
        signal.setitimer(signal.ITIMER_REAL, after)
        try:
            array[:] = data
        except Interrupted:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        settle()
    pytest.fail("every write finished before its alarm")


def test_an_interrupted_write_goes_on_until_settled(tmp_path: Path, alarm: None) -> None:
    where = tmp_path / "a.zarr"
    interrupted_write(str(where), "x")
    at_interrupt = chunk_files(where)
    running = settle()
    settled = chunk_files(where)
    assert running is not None and running > 0  # the interrupted write's coroutines ran on
    assert settled > at_interrupt  # ... and wrote chunks after the caller had given up
    time.sleep(0.3)
    assert settle() == 0 and chunk_files(where) == settled  # nothing more once settled


def test_discarding_a_staged_store_waits_for_its_interrupted_write(
    tmp_path: Path, alarm: None
) -> None:
    target = ResultStore.at(str(tmp_path / "s.zarr"))
    staged = target.staged("r1")
    _template(staged, "r1")
    interrupted_write(staged.url, "extra")
    target.discard(staged)
    time.sleep(0.5)  # a write still running would have made the directory again by now
    assert not Path(staged.url).exists() and not target.exists()
