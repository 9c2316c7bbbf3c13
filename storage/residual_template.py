"""The residual group's template: the root attributes and the metadata of every residual array,
written once before any block (no block data)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np
import xarray as xr
import zarr
import zarr.errors

from auditlib.exceptions import StoreError
from storage import schema as S
from storage.residuals import (
    LAYOUT,
    LAYOUT_ATTR,
    REPLICATE_CHUNK_ATTR,
    REPLICATE_SHA256,
    item_layout,
)

if TYPE_CHECKING:
    pass


def to_zarr(ds: xr.Dataset, url: str, **kw: Any) -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module="zarr")
        warnings.filterwarnings("ignore", message=".*Consolidated metadata.*")
        return ds.to_zarr(url, zarr_format=3, consolidated=False, **kw)


def _str_coord(values: Sequence[str]) -> np.ndarray:
    return np.array(list(values), dtype=object)


def create_residual_template(
    url: str,
    *,
    states: Sequence[str],
    geolevels: Sequence[str],
    replicates: int,
    n_items: int | np.ndarray,
    queries: Sequence[str],
    sigma2: np.ndarray,
    attrs: Mapping[str, Any],
    replicate_chunk: int | None = None,
) -> None:
    """Write the root attributes and the metadata of the residual arrays (no block data).

    ``replicate_chunk``: replicates per chunk of ``residual`` (default: all of them), the ranges
    separate tasks may write (:func:`write_residual_block`'s ``replicates``).

    ``n_items``: the items each (state, geolevel) block may hold, an array (state, geolevel) (0: a
    region without data) or one number for every region. The blocks lie one after the other on a
    flat item axis, each at its own length rounded up to whole chunks (``storage/residuals.py``);
    their offsets and capacities are written now.
    """
    s, g, r = len(states), len(geolevels), replicates
    planned = np.broadcast_to(np.asarray(n_items, dtype=np.int64), (s, g))
    lay = item_layout(planned, r)
    n, c = max(lay.n_items, 1), lay.chunk
    rc = r if not replicate_chunk else max(1, min(int(replicate_chunk), r))
    nv = len(S.RESIDUAL_BLOCK_VARS)
    try:  # the attributes (dpaudit's mark first of all) in the same write as the root itself
        zarr.open_group(
            url, mode="w-", zarr_format=3, attributes={**dict(attrs), S.STORE_ATTR: True}
        )
    except (FileExistsError, zarr.errors.ContainsGroupError, zarr.errors.ContainsArrayError) as exc:
        raise StoreError(f"store {url!r} already exists; a template is only written once") from exc
    coords = {
        S.STATE: _str_coord(states),
        S.GEOLEVEL: _str_coord(geolevels),
        S.REPLICATE: np.arange(r),
        S.QUERY: _str_coord(queries),
    }
    item = (S.ITEM,)
    ds = xr.Dataset(
        {
            "residual": (
                (S.REPLICATE, S.ITEM),
                da.full((r, n), np.nan, dtype=np.float32, chunks=(rc, n)),
                {"long_name": "DP count - true count", "units": "persons"},
            ),
            "truth": (item, da.zeros(n, dtype=np.int32, chunks=n)),
            "query_index": (
                item,
                da.full(n, -1, dtype=np.int16, chunks=n),
                {
                    "description": "index into the query coordinate; -1 = padding to the end of "
                    "a block's last chunk; past it a block's unused capacity is never written "
                    "(read a block's n_items only)"
                },
            ),
            "unit_index": (item, da.zeros(n, dtype=np.int32, chunks=n)),
            "cell_index": (item, da.zeros(n, dtype=np.int32, chunks=n)),
            "n_items": ((S.STATE, S.GEOLEVEL), da.zeros((s, g), dtype=np.int64, chunks=(1, 1))),
            S.BLOCK_SHA256: (
                (S.STATE, S.GEOLEVEL, S.BLOCK_VAR, S.BYTE),
                da.zeros((s, g, nv, 32), dtype=np.uint8, chunks=(1, 1, nv, 32)),
                {
                    "description": "sha256 of each block variable, written after the block; "
                    "all zero: block not written"
                },
            ),
            REPLICATE_SHA256: (
                (S.STATE, S.GEOLEVEL, S.REPLICATE, S.BYTE),
                da.zeros((s, g, r, 32), dtype=np.uint8, chunks=(1, 1, rc, 32)),
                {
                    "description": "sha256 of each replicate's row of a block, written after its "
                    "replicate range; all zero: not written"
                },
            ),
            "sigma2": ((S.GEOLEVEL, S.QUERY), np.asarray(sigma2, dtype=np.float64)),
            "item_offset": (
                (S.STATE, S.GEOLEVEL),
                lay.offset,
                {"description": "first item of the (state, geolevel) block"},
            ),
            "item_capacity": (
                (S.STATE, S.GEOLEVEL),
                lay.capacity,
                {"description": "items the block may hold; it spans them rounded up to chunks"},
            ),
        },
        coords={**coords, S.BLOCK_VAR: _str_coord(S.RESIDUAL_BLOCK_VARS)},
        attrs={LAYOUT_ATTR: LAYOUT, REPLICATE_CHUNK_ATTR: rc},
    )
    small = ("sigma2", "item_offset", "item_capacity")
    encoding = {
        "residual": {"chunks": (rc, c)},
        # integers carry no fill value, so xarray never masks them (0 and -1 are data)
        **{
            v: {"chunks": (c,), "_FillValue": None}
            for v in ("truth", "query_index", "unit_index", "cell_index")
        },
        "n_items": {"chunks": (1, 1), "_FillValue": None},
        S.BLOCK_SHA256: {"chunks": (1, 1, nv, 32), "_FillValue": None},
        REPLICATE_SHA256: {"chunks": (1, 1, rc, 32), "_FillValue": None},
        **{v: {"_FillValue": None} for v in small[1:]},
    }
    to_zarr(ds, url, group=S.RESIDUALS, mode="w", compute=False, encoding=encoding)
    # the small numpy-backed tables (sigma2, the blocks' places): written now
    to_zarr(ds[list(small)], url, group=S.RESIDUALS, mode="a")
    group = zarr.open_group(url, mode="r+", zarr_format=3, path=S.RESIDUALS)
    group.attrs[S.TEMPLATE_COMPLETE_ATTR] = True  # last: a resumed run may write into it
