"""Result store: template + chunk-aligned region writes, staging and publishing, refusal to clobber."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from auditlib import seeds
from auditlib.exceptions import StoreError
from auditlib.simulate import QueryPlan, simulate_block
from storage import schema as S
from storage import store


def make_block(n_units: int, reps: int, seed: int):
    truth = np.arange(n_units * 3, dtype=np.int64).reshape(n_units, 3)
    rngs = [seeds.rng(seed, seeds.NOISE, 1, 0, r) for r in range(reps)]
    return simulate_block([truth], [QueryPlan("q", 3, 3, 4.0)], [0], rngs)


def template(url: str, n_items: int = 12) -> None:
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
        store.write_residual_block(url, s, g, b, 12)
    store.write_residual_block(url, 0, 2, None, 12)
    store.finalize(url)
    ds = store.open_group(url, S.RESIDUALS)
    assert ds.residual.dims == (S.STATE, S.GEOLEVEL, S.REPLICATE, S.ITEM)
    assert list(ds.state.values) == ["US", "ST01", "ST02"]
    for (s, g), b in blocks.items():
        n = int(ds.n_items[s, g])
        assert n == b.n_items
        np.testing.assert_array_equal(ds.residual.values[s, g, :, :n], b.residual)
        assert np.isnan(ds.residual.values[s, g, :, n:]).all()
        np.testing.assert_array_equal(ds.truth.values[s, g, :n], b.truth)
    assert (ds.query_index.values[0, 2] == -1).all()
    # a notebook in another process opens it with one call
    code = (
        "import xarray as xr, sys; ds = xr.open_zarr(sys.argv[1], group='residuals'); "
        "print(int(ds.n_items.sum()))"
    )
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, url],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == str(12 + 9)


def test_misfit_regions_are_refused(tmp_path: Path) -> None:
    url = str(tmp_path / "s.zarr")
    template(url, n_items=5)
    with pytest.raises(StoreError, match="has 12 items; the store holds 5"):
        store.write_residual_block(url, 1, 1, make_block(4, 2, 1), 5)
    with pytest.raises(StoreError, match="outside the store"):
        store.write_residual_block(url, 7, 1, None, 5)
    with pytest.raises(StoreError, match="3 replicates"):
        store.write_residual_block(url, 1, 1, make_block(1, 3, 1), 5)


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
