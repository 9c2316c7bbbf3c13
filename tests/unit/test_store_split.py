"""Residual blocks written as replicate ranges by separate writers (a TopDown state's replicates
split over tasks): concurrent range writes in other processes store exactly what one writer of the
whole block stores; a range is marked done on its own, the block only once all its ranges are
(sealed with the same checksums whatever the split); misaligned ranges are refused; a corrupted
replicate is named by ``verify``."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import pytest
import zarr

from auditlib.exceptions import StoreError
from auditlib.simulate import ResidualBlock
from storage import checksums, store
from storage import schema as S
from storage.residuals import REPLICATE_SHA256
from tests.unit.test_store import make_block

REPS = 5


def template(url: str, chunk: int | None) -> None:
    store.create_residual_template(
        url,
        states=["ST01", "ST02"],
        geolevels=["State", "County"],
        replicates=REPS,
        n_items=np.array([[3, 12], [3, 9]]),
        queries=["q"],
        sigma2=np.full((2, 1), 4.0),
        attrs={"run_id": "abc"},
        replicate_chunk=chunk,
    )


def rows(b: ResidualBlock, r0: int, r1: int) -> ResidualBlock:
    """Replicates [r0, r1) of a block (what the task of that range computes)."""
    return replace(b, residual=b.residual[r0:r1])


BLOCKS = {(0, 1): (4, 11), (1, 1): (3, 12), (0, 0): (1, 13), (1, 0): (1, 14)}


def write_range(url: str, s: int, g: int, r0: int, r1: int) -> None:
    units, seed = BLOCKS[(s, g)]
    store.write_residual_block(
        url, s, g, rows(make_block(units, REPS, seed), r0, r1), replicates=(r0, r1)
    )


def values(url: str) -> dict[str, np.ndarray]:
    grp = zarr.open_group(url, mode="r", zarr_format=3, path=S.RESIDUALS)
    return {name: np.asarray(arr[...]) for name, arr in grp.arrays()}


def test_concurrent_range_writers_store_what_one_writer_stores(tmp_path: Path) -> None:
    whole = str(tmp_path / "whole.zarr")
    template(whole, None)
    for (s, g), (units, seed) in BLOCKS.items():
        store.write_residual_block(whole, s, g, make_block(units, REPS, seed))
    split = str(tmp_path / "split.zarr")
    template(split, 2)  # ranges [0, 2), [2, 4), [4, 5)
    jobs = [(split, s, g, r0, min(r0 + 2, REPS)) for (s, g) in BLOCKS for r0 in (4, 2, 0)]
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as ex:
        for f in [ex.submit(write_range, *j) for j in jobs]:
            f.result()
    a, b = values(whole), values(split)
    assert a.keys() == b.keys() and REPLICATE_SHA256 in a
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)  # checksums included
    assert store.done_blocks(split) == set(BLOCKS)
    for url in (whole, split):
        store.finalize(url)
        v = checksums.verify(url)
        assert not v.problems and v.blocks == 4


def test_a_block_is_done_only_when_every_range_is(tmp_path: Path) -> None:
    url = str(tmp_path / "s.zarr")
    template(url, 2)
    write_range(url, 1, 1, 2, 4)
    write_range(url, 1, 1, 4, 5)
    assert store.done_ranges(url) == {(1, 1, 2), (1, 1, 4)}
    assert store.done_blocks(url) == set()
    write_range(url, 1, 1, 0, 2)
    assert (1, 1, 0) in store.done_ranges(url)
    assert store.done_blocks(url) == {(1, 1)}
    # a writer killed between its range and the seal: the resume seals it from the store
    blank = np.zeros_like(np.asarray(zarr.open_array(f"{url}/residuals/block_sha256")[1, 1]))
    zarr.open_array(f"{url}/residuals/block_sha256", mode="r+")[1, 1] = blank
    assert store.done_blocks(url) == set() and store.pending_blocks(url) == {(1, 1)}
    assert store.seal_pending(url) == {(1, 1)} and store.done_blocks(url) == {(1, 1)}
    assert store.pending_blocks(url) == set()


def test_misaligned_ranges_are_refused(tmp_path: Path) -> None:
    url = str(tmp_path / "s.zarr")
    template(url, 2)
    b = make_block(4, REPS, 11)
    for r0, r1 in ((1, 3), (0, 3), (2, 6), (3, 3)):
        with pytest.raises(StoreError, match="whole chunks"):
            store.write_residual_block(url, 0, 1, rows(b, r0, min(r1, REPS)), replicates=(r0, r1))
    with pytest.raises(StoreError, match="replicates"):
        store.write_residual_block(url, 0, 1, rows(b, 0, 1), replicates=(0, 2))
    assert store.done_ranges(url) == set()


def test_verify_names_a_corrupted_replicate(tmp_path: Path) -> None:
    url = str(tmp_path / "s.zarr")
    template(url, 2)
    for s, g in BLOCKS:
        for r0 in (0, 2, 4):
            write_range(url, s, g, r0, min(r0 + 2, REPS))
    store.finalize(url)
    arr = zarr.open_array(f"{url}/residuals/residual", mode="r+")
    off = int(np.asarray(zarr.open_array(f"{url}/residuals/item_offset")[0, 1]))
    arr[3, off] = arr[3, off] + 1.0  # replicate 3 of block (ST01, County)
    problems = checksums.verify(url).problems
    assert any("replicate(s) 3" in p and "state=ST01, geolevel=County" in p for p in problems)
