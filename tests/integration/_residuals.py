"""The residuals group read block by block (``storage.residuals.open_residuals``) and laid out as
(state, geolevel, replicate, item) with NaN / −1 padding, for tests that index blocks by position."""

from __future__ import annotations

import numpy as np
import xarray as xr

from storage import schema as S
from storage.residuals import ITEM_VARS, open_residuals


def padded(url: str) -> xr.Dataset:
    """Every block's item variables, padded to the largest block, beside the group's
    coordinates, ``n_items`` and ``sigma2``."""
    res = open_residuals(url)
    ds = res.dataset
    n = np.asarray(ds["n_items"].values)
    s, g, r, width = *n.shape, ds.sizes[S.REPLICATE], max(int(n.max(initial=0)), 1)
    out = {
        "residual": np.full((s, g, r, width), np.nan, np.float32),
        "truth": np.zeros((s, g, width), np.int32),
        "query_index": np.full((s, g, width), -1, np.int16),
        "unit_index": np.zeros((s, g, width), np.int32),
        "cell_index": np.zeros((s, g, width), np.int32),
    }
    for si, state in enumerate(res.states):
        for gi, level in enumerate(res.geolevels):
            k = int(n[si, gi])
            blk = res.sel_block(state=state, geolevel=level)
            for name in ITEM_VARS:
                out[name][si, gi, ..., :k] = blk[name].values
    dims = (S.STATE, S.GEOLEVEL, S.ITEM)
    return xr.Dataset(
        {
            "residual": ((S.STATE, S.GEOLEVEL, S.REPLICATE, S.ITEM), out.pop("residual")),
            **{name: (dims, values) for name, values in out.items()},
            "n_items": ds["n_items"],
            "sigma2": ds["sigma2"],
        },
        coords={c: ds[c] for c in (S.STATE, S.GEOLEVEL, S.REPLICATE, S.QUERY)},
    )
