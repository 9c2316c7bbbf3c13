"""A long group written in parts (``store.write_group_parts``) is the group written whole
(``store.write_group``), byte for byte: every document and chunk file, its checksums and its
completion marker; the checksums read back in pieces are those read whole."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from auditlib.exceptions import StoreError
from storage import checksums, store
from storage import schema as S

ROWS = 130_001  # several zarr chunks of every dtype (25,000-value chunks of float64 at 100,000)


def long_table(n: int = ROWS, seed: int = 3) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    level = np.array(["All", "county", "block"], dtype=object)[np.minimum(np.arange(n) // 997, 2)]
    unit = np.array([f"B{i // 7}" for i in range(n)], dtype=object)
    return xr.Dataset(
        {
            "published": ("row", rng.poisson(3.0, n).astype(float)),
            "bias": ("row", rng.normal(size=n)),
            "lower": ("row", np.floor(rng.uniform(0, 9, n))),
            "n": ("row", rng.integers(0, 50, n)),
            "bias_corrected": ("row", rng.uniform(size=n) < 0.1),
        },
        coords={"level": ("row", level), "unit": ("row", unit)},
        attrs={"alpha": 0.1, "replicates": 25, "queries": ["total", "votingage"], "note": "x"},
    )


def files_of(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def cut(ds: xr.Dataset, bounds: list[int]) -> list[xr.Dataset]:
    edges = [0, *bounds, ds.sizes["row"]]
    return [ds.isel(row=slice(a, b)) for a, b in itertools.pairwise(edges)]


@pytest.mark.parametrize(
    "bounds",
    [
        [1, 2, 24_999, 25_000, 25_001, 60_000, 93_750, 130_000],  # across and on chunk edges
        [50_000],
        [],  # one part
    ],
)
def test_a_group_written_in_parts_is_the_group_written_whole(
    tmp_path: Path, bounds: list[int]
) -> None:
    ds = long_table()
    whole, parts = str(tmp_path / "whole.zarr"), str(tmp_path / "parts.zarr")
    for url in (whole, parts):
        zarr.open_group(url, mode="w", zarr_format=3)
    store.write_group(whole, "g", ds)
    assert store.write_group_parts(parts, "g", iter(cut(ds, bounds)), ROWS) == ROWS
    a, b = files_of(Path(whole) / "g"), files_of(Path(parts) / "g")
    assert len(zarr.open_group(whole, path="g")["published"].chunks) == 1
    assert zarr.open_group(whole, path="g")["published"].nchunks > 1  # several chunks
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []
    attrs = store.zarr_group(parts, "g").attrs
    assert attrs[S.GROUP_COMPLETE_ATTR] is True and set(attrs[S.SHA256_ATTR]) == set(ds.variables)
    back = store.dataset(parts, "g", consolidated=False).load()
    xr.testing.assert_identical(back, store.dataset(whole, "g", consolidated=False).load())


def test_missing_rows_are_refused_and_the_group_is_not_marked_complete(tmp_path: Path) -> None:
    ds = long_table(1000)
    url = str(tmp_path / "s.zarr")
    zarr.open_group(url, mode="w", zarr_format=3)
    with pytest.raises(StoreError, match="999 rows written in parts, not 1000"):
        store.write_group_parts(url, "g", cut(ds, [999])[:1], 1000)
    assert not store.group_complete(url, "g")


def test_checksums_read_in_pieces_are_those_read_whole(tmp_path: Path) -> None:
    url = str(tmp_path / "s.zarr")
    zarr.open_group(url, mode="w", zarr_format=3)
    store.write_group(url, "g", long_table())
    grp = zarr.open_group(url, path="g")
    for name, arr in grp.arrays():
        whole = checksums.digest(arr[...])
        for piece in (1, 7, 25_000, 40_000, 10**9):
            assert checksums.array_digest(arr, piece) == whole, (name, piece)
