"""Result store: template + chunk-aligned region writes, staging and publishing, refusal to clobber."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from auditlib import seeds
from auditlib.exceptions import StoreError
from auditlib.simulate import QueryPlan, simulate_block
from storage import schema as S
from storage import store
from storage.residuals import ITEM_CHUNK, item_chunk, open_residuals


def make_block(n_units: int, reps: int, seed: int):
    truth = np.arange(n_units * 3, dtype=np.int64).reshape(n_units, 3)
    rngs = [seeds.rng(seed, seeds.NOISE, 1, 0, r) for r in range(reps)]
    return simulate_block([truth], [QueryPlan("q", 3, 3, 4.0)], [0], rngs)


def template(url: str, n_items: int | np.ndarray = 12) -> None:
    """The residual template of US, ST01 and ST02 at US, State and County, two replicates of one
    query, ``n_items`` in every block (or block by block)."""
    store.create_residual_template(
        url,
        states=["US", "ST01", "ST02"],
        geolevels=["US", "State", "County"],
        replicates=2,
        n_items=n_items,
        queries=["q"],
        sigma2=np.full((3, 1), 4.0),
        attrs={"run_id": "abc"},
    )


def test_regions_round_trip_in_a_fresh_process(tmp_path: Path) -> None:
    url = str(tmp_path / "s.zarr")
    template(url)
    blocks = {(1, 2): make_block(4, 2, 1), (2, 2): make_block(3, 2, 2)}
    for (s, g), b in blocks.items():
        store.write_residual_block(url, s, g, b)
    store.write_residual_block(url, 0, 2, None)
    store.finalize(url)
    ds = store.open_group(url, S.RESIDUALS)
    assert ds.residual.dims == (S.REPLICATE, S.ITEM)
    assert list(ds.state.values) == ["US", "ST01", "ST02"]
    res = open_residuals(url)
    for (s, g), b in blocks.items():
        blk = res.sel_block(state=res.states[s], geolevel=res.geolevels[g])
        assert int(ds.n_items[s, g]) == b.n_items == blk.sizes[S.ITEM]
        np.testing.assert_array_equal(blk.residual.values, b.residual)
        np.testing.assert_array_equal(blk.truth.values, b.truth)
        np.testing.assert_array_equal(blk.query_index.values, b.query_index)
        got = store.read_residuals(url, s, g)
        np.testing.assert_array_equal(got[0], b.residual)
        np.testing.assert_array_equal(got[1], b.query_index)
    assert res.sel_block(state="US", geolevel="County").sizes[S.ITEM] == 0
    # a notebook in another process opens it with one call
    code = (
        "import sys; from storage.residuals import open_residuals; "
        "r = open_residuals(sys.argv[1]).sel_block(state='ST01', geolevel='County'); "
        "print(r.residual.shape, float(r.residual.sum()))"
    )
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, url],
        capture_output=True,
        text=True,
        check=True,
    )
    b = blocks[(1, 2)]
    assert out.stdout.strip() == f"(2, {b.n_items}) {float(b.residual.sum())}"


def test_each_block_is_held_at_its_own_length(tmp_path: Path) -> None:
    """The item axis holds every block at its planned length, rounded up to whole chunks only:
    not every region padded to the largest block."""
    url = str(tmp_path / "s.zarr")
    planned = np.array([[3, 0, 0], [0, 1, 20_000], [0, 5, 9_000]])
    template(url, planned)
    ds = xr.open_zarr(url, group=S.RESIDUALS, consolidated=False, chunks=None)
    chunk = ds.residual.encoding["chunks"][1]
    assert chunk == 32_768 <= ITEM_CHUNK  # the power of two >= the largest block
    assert item_chunk(2, 300) == 512 and item_chunk(1000, 10**6) == 4096  # a chunk <= 16 MiB
    np.testing.assert_array_equal(ds.item_capacity.values, planned)
    span = -(-planned.ravel() // chunk) * chunk  # each block's whole chunks, in order
    assert ds.sizes[S.ITEM] == int(span.sum()) == 5 * chunk < planned.size * int(planned.max())
    off = ds.item_offset.values.ravel()
    assert (off % chunk == 0).all() and (np.diff(off) == span[:-1]).all()
    # a block fills its place; its neighbour's items are untouched
    big = make_block(20_000 // 3, 2, 5)
    store.write_residual_block(url, 1, 2, big)
    store.write_residual_block(url, 2, 1, make_block(1, 2, 6))
    got, _ = store.read_residuals(url, 1, 2)
    np.testing.assert_array_equal(got, big.residual)
    assert store.read_residuals(url, 2, 1)[0].shape == (2, 3)
    with pytest.raises(StoreError, match="has 6 items; the store holds 1 for it"):
        store.write_residual_block(url, 1, 1, make_block(2, 2, 1))


def test_a_layout_1_store_is_read_and_not_resumed(tmp_path: Path) -> None:
    """Stores of the padded layout 1 (no ``dpaudit_layout``) are read block by block; a run of the
    same spec does not resume into one (it starts again); writing into one names the fix."""
    url = str(tmp_path / "old.zarr")
    res = np.full((2, 3, 2, 5), np.nan, np.float32)
    res[1, 2, :, :3] = [[1, 2, 3], [4, 5, 6]]
    qi = np.full((2, 3, 5), -1, np.int16)
    qi[1, 2, :3] = 0
    zeros = np.zeros((2, 3, 5), np.int32)
    old = xr.Dataset(
        {
            "residual": ((S.STATE, S.GEOLEVEL, S.REPLICATE, S.ITEM), res),
            "truth": ((S.STATE, S.GEOLEVEL, S.ITEM), zeros),
            "query_index": ((S.STATE, S.GEOLEVEL, S.ITEM), qi),
            "unit_index": ((S.STATE, S.GEOLEVEL, S.ITEM), zeros),
            "cell_index": ((S.STATE, S.GEOLEVEL, S.ITEM), zeros),
            "n_items": ((S.STATE, S.GEOLEVEL), np.array([[0, 0, 0], [0, 0, 3]])),
        },
        coords={
            S.STATE: np.array(["US", "ST01"], dtype=object),
            S.GEOLEVEL: np.array(["US", "State", "County"], dtype=object),
        },
    )
    zarr.open_group(url, mode="w", zarr_format=3, attributes={"run_id": "abc", S.STORE_ATTR: True})
    old.to_zarr(url, group=S.RESIDUALS, zarr_format=3, consolidated=False, mode="w")
    zarr.open_group(url, mode="r+", zarr_format=3, path=S.RESIDUALS).attrs[
        S.TEMPLATE_COMPLETE_ATTR
    ] = True
    with pytest.raises(StoreError, match=r"padded residual layout 1.*--overwrite"):
        store.write_residual_block(url, 1, 2, None)
    zarr.consolidate_metadata(url, zarr_format=3)
    blk = open_residuals(url).sel_block(state="ST01", geolevel="County")
    np.testing.assert_array_equal(blk.residual.values, [[1, 2, 3], [4, 5, 6]])
    assert store.resume_point(url, "abc") is None and not Path(url).exists()


def test_misfit_regions_are_refused(tmp_path: Path) -> None:
    url = str(tmp_path / "s.zarr")
    template(url, n_items=5)
    with pytest.raises(StoreError, match="has 12 items; the store holds 5 for it"):
        store.write_residual_block(url, 1, 1, make_block(4, 2, 1))
    with pytest.raises(StoreError, match="outside the store"):
        store.write_residual_block(url, 7, 1, None)
    with pytest.raises(StoreError, match="3 replicates"):
        store.write_residual_block(url, 1, 1, make_block(1, 3, 1))


def test_template_refuses_an_existing_store(tmp_path: Path) -> None:
    url = str(tmp_path / "s.zarr")
    template(url)
    with pytest.raises(Exception, match="exist"):
        template(url)


def test_check_target_staging_and_publish(tmp_path: Path) -> None:
    url = str(tmp_path / "out" / "audit.zarr")
    store.check_target(url, overwrite=False)  # nothing there yet
    staging = store.staging_path(url, "r1")
    assert Path(staging).parent == Path(url).parent and Path(staging).name.startswith(".")
    Path(staging).parent.mkdir(parents=True)
    template(staging)
    store.finalize(staging)
    store.publish(staging, url)
    assert not Path(staging).exists() and Path(url, "zarr.json").exists()
    with pytest.raises(StoreError, match="already exists; pass --overwrite"):
        store.check_target(url, overwrite=False)
    store.check_target(url, overwrite=True)
    # discarding a failed run's staging never touches the target
    staging2 = store.staging_path(url, "r2")
    template(staging2)
    store.discard(staging2, url)
    assert not Path(staging2).exists() and Path(url).exists()
    assert store.root_attrs(url)[S.COMPLETE_ATTR] is True
