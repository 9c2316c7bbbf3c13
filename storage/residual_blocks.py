"""The residual group's blocks: one chunk-aligned (state, level) region per writer, its
checksums recorded after its data (the marker a resumed run skips it by), and reading a block's
residuals, cells and items back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np
import zarr
import zarr.errors

from auditlib.exceptions import StoreError
from storage import checksums, files
from storage import schema as S
from storage.residuals import (
    LAYOUT,
    REPLICATE_SHA256,
    layout_of,
    pieces,
    replicate_ranges,
    spans,
    split_digest,
)
from storage.staging import remove
from storage.targets import exists, group_attrs, root_attrs

if TYPE_CHECKING:
    from auditlib.simulate.release import ResidualItems


class Arrays:
    """The residual group's arrays of one operation: the group and each array opened once (each
    open reads a metadata document: on an object store, a request or two)."""

    def __init__(self, url: str, mode: str = "r") -> None:
        self.url = url
        self.group = zarr.open_group(
            url,
            mode=mode,  # type: ignore[arg-type]
            zarr_format=3,
            path=S.RESIDUALS,
        )
        self._open: dict[str, zarr.Array] = {}

    def __getitem__(self, name: str) -> zarr.Array:
        if name not in self._open:
            arr = self.group[name]
            if not isinstance(arr, zarr.Array):
                raise StoreError(f"{S.RESIDUALS}/{name} in {self.url!r} is not an array")
            self._open[name] = arr
        return self._open[name]


def residual_array(url: str, name: str, mode: str = "r") -> zarr.Array:
    return Arrays(url, mode)[name]


#: the item variables of a block with their padding value, beside ``residual`` (NaN padding)
_ITEM_PADDING = {"truth": 0, "query_index": -1, "unit_index": 0, "cell_index": 0}


def block_place(url: str, state: int, level: int) -> tuple[int, int, int]:
    """(first item, planned items, items of the whole chunks it is written as: those of its
    ``n_items``, 0 before it is written) of a block on the item axis."""
    return _place(Arrays(url), state, level)


def _place(arrays: Arrays, state: int, level: int) -> tuple[int, int, int]:
    if "item_offset" not in arrays.group:
        raise StoreError(
            f"store {arrays.url!r} has the padded residual layout 1 of an older dpaudit; this "
            f"dpaudit writes layout {LAYOUT}: re-run the audit with --overwrite to rebuild it"
        )
    off, cap, truth = (arrays[name] for name in ("item_offset", "item_capacity", "truth"))
    shape = off.shape
    if not (0 <= state < shape[0] and 0 <= level < shape[1]):
        raise StoreError(f"region (state={state}, geolevel={level}) is outside the store {shape}")
    n = int(np.asarray(arrays["n_items"][state, level]))
    return (
        int(np.asarray(off[state, level])),
        int(np.asarray(cap[state, level])),
        int(spans(n, int(truth.chunks[0]))),
    )


def replicate_chunk(url: str) -> int:
    """Replicates per chunk of a store's ``residual``: the ranges its writers may take."""
    return int(residual_array(url, "residual").chunks[0])


def write_residual_block(
    url: str,
    state: int,
    level: int,
    block: ResidualItems | None,
    *,
    replicates: tuple[int, int] | None = None,
) -> int:
    """Write one (state, level) block (whole, or read in consecutive item ranges: any
    ``ResidualItems``), or the replicate range ``replicates`` = (start, stop) of it (whole chunks
    of the replicate axis: a multiple of the store's replicate chunk, or up to the last
    replicate): its rows of the whole chunks its items take on the item axis (its items, then
    NaN padding to the end of their last chunk; the rest of its planned place is never written),
    in pieces (``storage.residuals.pieces``), then each replicate's digest (the range's completion
    marker). The first range also writes the block's item variables (−1 / 0 padding) and
    ``n_items`` before its digests. The block's checksums follow once every replicate of the
    block is written (:func:`seal_block`)."""
    arrays = Arrays(url, mode="r+")
    off, cap, _ = _place(arrays, state, level)
    arr = arrays["residual"]
    r, rc, chunk = arr.shape[0], int(arr.chunks[0]), int(arr.chunks[1])
    r0, r1 = (0, r) if replicates is None else (int(replicates[0]), int(replicates[1]))
    if not (0 <= r0 < r1 <= r) or r0 % rc or (r1 % rc and r1 != r):
        raise StoreError(
            f"replicates [{r0}, {r1}) of block ({state}, {level}) are not whole chunks of the "
            f"store's {r} replicates (chunks of {rc}); write ranges of {rc} replicates"
        )
    n = 0 if block is None else block.n_items
    if n > cap:
        raise StoreError(f"block ({state}, {level}) has {n} items; the store holds {cap} for it")
    if block is not None and block.replicates != r1 - r0:
        raise StoreError(
            f"block has {block.replicates} replicates; the range [{r0}, {r1}) {r1 - r0}"
        )
    span = int(spans(n, chunk))
    first = r0 == 0  # one writer of the block's items: the task of its first range
    rows = [checksums.DigestStream(span, np.float32) for _ in range(r1 - r0)]
    names = tuple(_ITEM_PADDING) if first else ()
    targets = {name: arrays[name] for name in names}
    streams = {name: checksums.DigestStream(span, targets[name].dtype) for name in names}
    for a, b in pieces(span, chunk, r1 - r0):
        m = max(0, min(b, n) - a)  # the piece's own items, then padding
        res = np.full((r1 - r0, b - a), np.nan, np.float32)
        got = block.items(a, a + m) if block is not None and m else None
        if got is not None:
            res[:, :m] = got.residual
        arr[r0:r1, off + a : off + b] = res
        for h, row in zip(rows, res, strict=True):
            h.update(row)
        for name in names:
            vals = np.full(b - a, _ITEM_PADDING[name], targets[name].dtype)
            if got is not None:
                vals[:m] = getattr(got, name)
            targets[name][off + a : off + b] = vals
            streams[name].update(vals)
    digests = None
    if first:
        count = np.array([[n]], np.int64)
        arrays["n_items"][state : state + 1, level : level + 1] = count
        digests = {name: h.digest() for name, h in streams.items()}
        digests["n_items"] = checksums.digest(count)
    # each replicate's digest after its data: the range's completion marker
    done = np.stack([np.frombuffer(h.digest(), np.uint8) for h in rows])
    arrays[REPLICATE_SHA256][state, level, r0:r1] = done
    _seal(arrays, state, level, digests)
    return n


def item_digests(url: str, state: int, level: int) -> dict[str, bytes]:
    """The digests of a written block's item variables and ``n_items``, read back in pieces."""
    return _item_digests(Arrays(url), state, level)


def _item_digests(arrays: Arrays, state: int, level: int) -> dict[str, bytes]:
    off, _, span = _place(arrays, state, level)
    out: dict[str, bytes] = {}
    for name in _ITEM_PADDING:
        out[name] = checksums.slice_digest(arrays[name], slice(off, off + span))
    count = np.asarray(arrays["n_items"][state : state + 1, level : level + 1])
    out["n_items"] = checksums.digest(count)
    return out


def seal_block(
    url: str, state: int, level: int, digests: Mapping[str, bytes] | None = None
) -> bool:
    """Write a block's checksums (its completion marker) if every replicate of it is written;
    return whether it is sealed. ``digests``: those of its item variables and ``n_items`` as
    written (else read back, :func:`item_digests`). Two tasks finishing a block's last ranges
    together both write the same bytes."""
    return _seal(Arrays(url, mode="r+"), state, level, digests)


def _seal(
    arrays: Arrays, state: int, level: int, digests: Mapping[str, bytes] | None = None
) -> bool:
    reps = np.asarray(arrays[REPLICATE_SHA256][state, level])
    if not reps.any(axis=-1).all():
        return False
    if digests is None:
        digests = _item_digests(arrays, state, level)
    rows = np.stack(
        [
            np.frombuffer(split_digest(reps) if name == "residual" else digests[name], np.uint8)
            for name in S.RESIDUAL_BLOCK_VARS
        ]
    )
    arrays[S.BLOCK_SHA256][state, level] = rows
    return True


def done_blocks(url: str, among: Iterable[tuple[int, int]] | None = None) -> set[tuple[int, int]]:
    """(state, level) indices of the blocks whose writes completed (their checksums are set);
    ``among``: of these blocks only, reading their marks alone (a progress poll asks for those it
    has not yet seen done: on an object store, a request per block asked, not one per block of
    the store)."""
    arr = residual_array(url, S.BLOCK_SHA256)
    if among is None:
        marks = np.asarray(arr[...]).reshape(*arr.shape[:2], -1)
        s, g = np.nonzero(marks.any(axis=-1))
        return {(int(a), int(b)) for a, b in zip(s, g, strict=True)}
    pairs = sorted({(int(a), int(b)) for a, b in among})
    if not pairs:
        return set()
    st, gl = (np.array(x, dtype=np.int64)[:, None, None] for x in zip(*pairs, strict=True))
    nv, nb = arr.shape[2], arr.shape[3]
    got = np.asarray(arr.vindex[st, gl, np.arange(nv)[None, :, None], np.arange(nb)[None, None, :]])
    return {pairs[i] for i in np.nonzero(got.reshape(len(pairs), -1).any(axis=-1))[0].tolist()}


def done_ranges(url: str) -> set[tuple[int, int, int]]:
    """(state, level, first replicate) of every replicate range whose writes completed (every
    replicate's digest set), in a layout-3 store."""
    arr = residual_array(url, REPLICATE_SHA256)
    written = np.asarray(np.asarray(arr[...]).any(axis=-1))  # (state, level, replicate)
    out: set[tuple[int, int, int]] = set()
    for r0, r1 in replicate_ranges(arr.shape[2], int(arr.chunks[2])):
        s, g = np.nonzero(written[:, :, r0:r1].all(axis=-1))
        out |= {(int(a), int(b), r0) for a, b in zip(s, g, strict=True)}
    return out


def pending_blocks(url: str) -> set[tuple[int, int]]:
    """The blocks whose every replicate range is written but whose checksums are not (a run
    killed between its last range and the seal): done once sealed (:func:`seal_pending`)."""
    arr = residual_array(url, REPLICATE_SHA256)
    written = np.asarray(arr[...]).any(axis=-1).all(axis=-1)
    pending = {(int(a), int(b)) for a, b in zip(*np.nonzero(written), strict=True)}
    return pending - done_blocks(url)


def seal_pending(url: str) -> set[tuple[int, int]]:
    """Seal the :func:`pending_blocks`; return them."""
    pending = pending_blocks(url)
    for s, g in sorted(pending):
        seal_block(url, s, g)
    return pending


def _items(arrays: Arrays, state: int, level: int) -> slice:
    off, _, _ = _place(arrays, state, level)
    n = int(np.asarray(arrays["n_items"][state, level]))
    return slice(off, off + n)


def read_residuals(url: str, state: int, level: int) -> tuple[np.ndarray, np.ndarray]:
    """(residual (replicates, n), query_index (n,)) of one block, its own items only."""
    arrays = Arrays(url)
    items = _items(arrays, state, level)
    res = np.asarray(arrays["residual"][:, items])
    qi = np.asarray(arrays["query_index"][items])
    return res, qi


def read_query_index(url: str, state: int, level: int) -> np.ndarray:
    """query_index (n,) of one block's items."""
    arrays = Arrays(url)
    return np.asarray(arrays["query_index"][_items(arrays, state, level)])


def read_residual_rows(url: str, state: int, level: int, rows: int, start: int = 0) -> np.ndarray:
    """``rows`` replicates from ``start`` (the first ones by default; fewer at the end) of one
    block's residuals, as :func:`read_residuals` reads them: (rows read, n)."""
    arrays = Arrays(url)
    first = max(0, start)
    return np.asarray(
        arrays["residual"][first : first + max(0, rows), _items(arrays, state, level)]
    )


def read_cells(url: str, state: int, level: int) -> np.ndarray:
    """cell_index (n,) of one block's items (the cell of its query each item counts)."""
    arrays = Arrays(url)
    return np.asarray(arrays["cell_index"][_items(arrays, state, level)])


def read_items(url: str, state: int, level: int) -> tuple[np.ndarray, np.ndarray]:
    """(truth (n,), unit_index (n,)) of one block's items."""
    arrays = Arrays(url)
    items = _items(arrays, state, level)
    truth = np.asarray(arrays["truth"][items])
    return truth, np.asarray(arrays["unit_index"][items])


def resume_point(url: str, run_id: str) -> set[tuple[int, int]] | None:
    """The finished (state, level) blocks of an interrupted run of the same spec at ``url``.

    ``None``: nothing there yet (start a new store). A store of another spec is refused; one of
    this spec in an older residual layout (written by an older dpaudit) is removed (start again).
    """
    if not exists(url):
        return None
    files.check_documents(url)  # a store left by an earlier run: read only once checked
    attrs = root_attrs(url)
    if not template_complete(url) and attrs.get("run_id") in (None, run_id):
        remove(url, run_id)  # killed while its template was being written: start again
        return None
    if attrs.get("run_id") == run_id and layout_of(group_attrs(url, S.RESIDUALS)) != LAYOUT:
        remove(url, run_id)  # this spec's run by an older dpaudit (padded blocks): start again
        return None
    if attrs.get("run_id") != run_id:
        raise StoreError(
            f"store {url!r} holds an unfinished run of a different spec (run id "
            f"{attrs.get('run_id')!r}, this spec {run_id!r}); pass --overwrite to replace it, or "
            "choose another output.store"
        )
    seal_pending(url)
    return done_blocks(url)


def template_complete(url: str) -> bool:
    root = zarr.open_group(url, mode="r", zarr_format=3)
    return S.RESIDUALS in root and bool(root[S.RESIDUALS].attrs.get(S.TEMPLATE_COMPLETE_ATTR))
