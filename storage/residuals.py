"""The residuals group's layout: every (state, geolevel) block at its own length on one flat item
axis, and a reader that selects a block in one line.

Layout 2 (``dpaudit_layout`` = 2 in the residuals group's attributes): ``residual(replicate, item)``, ``truth``,
``query_index``, ``unit_index``, ``cell_index`` (item) hold every block one after the other; block
(s, g) starts at item ``item_offset[s, g]`` and holds
``n_items[s, g]`` of them (at most its planned ``item_capacity``). Each block starts on a chunk
boundary of the item axis and is written by one task as whole chunks — its capacity rounded up to
whole chunks of ``item_chunk`` items (a power of two ≤ 65,536 and ≤ the largest block's
rounded up) — so concurrent writers never share a chunk (Zarr loses updates when they do): each
block is padded by less than one chunk, never to the largest block. Chunks of padding alone are
not written, and padding compresses to almost nothing.

Layout 4 (``dpaudit_layout`` = 4; what this dpaudit writes): layout 3, each block written (and
digested) as the whole chunks its ``n_items`` items take, not its capacity's: the rest of its
planned place is never written, never read, and reads as the arrays' fill values. A block's
capacity (an upper bound: a production block's is, per query, ``(replicates + 1) × people``)
reserves room on the item axis and costs neither memory nor disk; a block is written, read back
and verified in pieces of whole chunks (``storage/residual_blocks.py``), so no task holds more
than its items and one piece.

Layout 3 (stores written before): layout 2 with the replicate axis of
``residual`` chunked by ``replicate_chunk`` (a residuals group attribute; the whole axis in one
chunk unless the flow splits a state's replicates over tasks, ``cluster.replicates_per_task``), so
that each task writes whole chunks of its own replicate range and no chunk straddles two tasks'
ranges; and ``replicate_sha256(state, geolevel, replicate, byte)``, the sha256 of each replicate's
row of a block (its whole chunks; in layout 3 of its capacity), written by the task of that replicate's range after its data:
the completion marker of a (state, geolevel, replicate range). The task of the first range also
writes the block's item variables and ``n_items``; the block's checksums (``block_sha256``, the
residual's entry the sha256 of its replicates' digests in order, so independent of the split) are
written once every replicate of the block is (by the task that finds them all done, or by a
resumed run). The values stored do not depend on the split.

Layout 2 (stores written before): as layout 3 with the whole replicate axis in one chunk, no
``replicate_sha256``, and the residual's block checksum over the whole block.

Layout 1 (stores written before; no ``dpaudit_layout``): ``residual(state, geolevel, replicate,
item)`` and the other block variables (state, geolevel, item), every block padded to the largest
one (NaN, ``query_index`` −1). :func:`open_residuals` reads both layouts; a run never resumes
into a layout-1 staging copy (it starts again).

In a notebook::

    from storage.residuals import open_residuals

    res = open_residuals("results/audit.zarr")
    r = res.sel_block(state="ST01", geolevel="County").residual  # (replicate, item)
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import xarray as xr

from auditlib.exceptions import StoreError
from storage import schema as S

#: the residual layout this dpaudit writes (residuals group attribute ``dpaudit_layout``; absent: 1)
LAYOUT = 4
LAYOUT_ATTR = "dpaudit_layout"
#: residuals group attribute of layout 3: replicates per chunk of ``residual``'s replicate axis
REPLICATE_CHUNK_ATTR = "replicate_chunk"
#: layout 3: the sha256 of each (state, geolevel, replicate) row of ``residual`` (zero: not written)
REPLICATE_SHA256 = "replicate_sha256"
#: most items per chunk of the flat item axis (fewer for small blocks or many replicates)
ITEM_CHUNK = 65536
#: the variables of the item axis, in the order they are written
ITEM_VARS = ("residual", "truth", "query_index", "unit_index", "cell_index")


@dataclass(frozen=True)
class ItemLayout:
    """Where each (state, geolevel) block lives on the flat item axis."""

    offset: npt.NDArray[np.int64]  # (state, geolevel): first item of the block (a chunk boundary)
    capacity: npt.NDArray[np.int64]  # (state, geolevel): items the block may hold (as planned)
    chunk: int  # items per chunk

    @property
    def span(self) -> npt.NDArray[np.int64]:
        """Items of the whole chunks each block is written as (its capacity, rounded up)."""
        return spans(self.capacity, self.chunk)

    @property
    def n_items(self) -> int:
        """The length of the item axis."""
        return int((self.offset + self.span).max(initial=0))


def spans(capacity: npt.ArrayLike, chunk: int) -> npt.NDArray[np.int64]:
    """Capacities rounded up to whole chunks."""
    return np.asarray(-(-np.asarray(capacity, dtype=np.int64) // chunk) * chunk, dtype=np.int64)


#: most bytes of residual rows a writer or reader holds at once beside a block's items: a block
#: is written, read back and verified in pieces of whole chunks of about this size
PIECE_BYTES = 64 << 20


def pieces(span: int, chunk: int, rows: int) -> list[tuple[int, int]]:
    """[start, stop) of the pieces of whole chunks a block's ``span`` items are written and read
    in: each at most :data:`PIECE_BYTES` of ``rows`` float32 rows (one chunk at least)."""
    step = int(chunk) * max(1, PIECE_BYTES // (4 * max(int(rows), 1) * int(chunk)))
    return [(a, min(a + step, int(span))) for a in range(0, int(span), step)]


def item_chunk(replicates: int, largest: int = ITEM_CHUNK) -> int:
    """Items per chunk: the power of two ≥ the largest block, at most :data:`ITEM_CHUNK`, halved
    while a residual chunk would exceed 16 MiB."""
    c = 64
    while c < min(int(largest), ITEM_CHUNK):
        c *= 2
    while c > 64 and c * max(int(replicates), 1) * 4 > 16 * 2**20:
        c //= 2
    return c


def replicate_ranges(replicates: int, chunk: int) -> list[tuple[int, int]]:
    """[start, stop) of each range of ``chunk`` replicates (the last one shorter)."""
    r, c = int(replicates), max(1, int(chunk))
    return [(a, min(a + c, r)) for a in range(0, r, c)]


def split_digest(replicate_digests: npt.ArrayLike) -> bytes:
    """The residual's block checksum in layout 3: sha256 of its replicates' digests, in order."""
    rows = np.ascontiguousarray(np.asarray(replicate_digests, dtype=np.uint8))
    return hashlib.sha256(b"per-replicate sha256:" + rows.tobytes()).digest()


def item_layout(planned: npt.ArrayLike, replicates: int) -> ItemLayout:
    """The flat layout of blocks with ``planned`` items each ((state, geolevel), 0: no data): in
    (state, geolevel) order, each block starting on a chunk boundary."""
    n = np.asarray(planned, dtype=np.int64)
    if n.ndim != 2 or (n < 0).any():
        raise StoreError(
            f"planned items must be a (state, geolevel) array ≥ 0, got shape {n.shape}"
        )
    c = item_chunk(replicates, int(n.max(initial=0)))
    flat = spans(n, c).ravel()
    offset = (np.cumsum(flat) - flat).reshape(n.shape)
    return ItemLayout(offset.astype(np.int64), n.copy(), c)


def layout_of(attrs: Mapping[str, Any]) -> int:
    """The residual layout of a store from its residuals group's attributes (1: written before
    layouts were numbered)."""
    v = attrs.get(LAYOUT_ATTR, 1)
    return int(v) if isinstance(v, int | np.integer) and not isinstance(v, bool) else 1


class Residuals:
    """The residuals group of a store, with one-line selection of a (state, geolevel) block.

    ``dataset`` is the group as stored (lazily loaded). :meth:`sel_block` returns one block's
    ``residual`` (replicate, item), ``truth``, ``query_index``, ``unit_index`` and ``cell_index``
    (item) — its own ``n_items`` items, no padding — whatever the store's layout.
    """

    def __init__(self, dataset: xr.Dataset, layout: int) -> None:
        self.dataset = dataset
        self.layout = layout
        self.states = [str(s) for s in dataset[S.STATE].values]
        self.geolevels = [str(g) for g in dataset[S.GEOLEVEL].values]

    def index(self, state: str, geolevel: str) -> tuple[int, int]:
        """(state, geolevel) indices of a block named by its labels."""
        if state not in self.states:
            raise StoreError(
                f"no state {state!r} in the residuals; the store has {', '.join(self.states)}"
            )
        if geolevel not in self.geolevels:
            raise StoreError(
                f"no geolevel {geolevel!r} in the residuals; the store has "
                f"{', '.join(self.geolevels)}"
            )
        return self.states.index(state), self.geolevels.index(geolevel)

    def n_items(self, state: str, geolevel: str) -> int:
        s, g = self.index(state, geolevel)
        return int(self.dataset["n_items"].values[s, g])

    def sel_block(self, state: str, geolevel: str) -> xr.Dataset:
        """One block's item variables, its own items only (``state``/``geolevel`` as coordinates)."""
        s, g = self.index(state, geolevel)
        ds = self.dataset
        n = int(ds["n_items"].values[s, g])
        names = [v for v in ITEM_VARS if v in ds]
        if self.layout == 1:
            out = ds[names].isel({S.STATE: s, S.GEOLEVEL: g, S.ITEM: slice(0, n)})
        else:
            off = int(ds["item_offset"].values[s, g])
            out = ds[names].isel({S.ITEM: slice(off, off + n)})
            out = out.assign_coords({S.STATE: self.states[s], S.GEOLEVEL: self.geolevels[g]})
        return out.drop_vars(["item_offset", "item_capacity"], errors="ignore")

    def blocks(self) -> list[tuple[str, str]]:
        """(state, geolevel) labels of every block holding items."""
        n = np.asarray(self.dataset["n_items"].values)
        return [(self.states[s], self.geolevels[g]) for s, g in zip(*np.nonzero(n), strict=True)]


def open_residuals(url: str, **kw: Any) -> Residuals:
    """The residuals group of a completed store (any layout): ``open_residuals(url).sel_block(
    state="ST01", geolevel="County")``. Keywords go to ``xarray.open_zarr`` (e.g.
    ``storage_options`` of an ``s3://`` store)."""
    import zarr

    opts = kw.get("storage_options")
    if not opts:
        from storage.files import check_documents

        check_documents(url)  # before zarr reads any metadata document
    grp = zarr.open_group(url, mode="r", zarr_format=3, path=S.RESIDUALS, storage_options=opts)
    layout = layout_of(dict(grp.attrs))
    if layout > LAYOUT:
        raise StoreError(
            f"store {url!r} has residual layout {layout}, newer than this dpaudit reads "
            f"({LAYOUT}); upgrade dpaudit"
        )
    kw.setdefault("chunks", None)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning)
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        ds = xr.open_zarr(url, group=S.RESIDUALS, consolidated=True, **kw)
    return Residuals(ds, layout)
