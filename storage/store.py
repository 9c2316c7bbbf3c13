"""Open, template and write result stores (Zarr v3 through xarray).

Writes are safe by construction: the template is written once (metadata only), each worker writes
exactly one chunk-aligned (state, geolevel) region, and small groups are written whole by one writer
(a long table, the error bars', by one writer in parts appended in order: ``write_group_parts``).
A local store is built in a staging directory beside its target and moved into place only when the run
has completed, so a failed or interrupted run never leaves a half-written store at the target. An
``s3://`` store (no rename) is staged under a prefix beside its target and published by copying, the
root metadata with the completion marker and the consolidated metadata last. Every block records its
checksums after its data (``storage/checksums.py``): they are both its integrity record and the
marker a resumed run uses to skip it.

This module is the store's API in one namespace. It holds the small groups written whole (or in
parts), the root attributes, completion (``finalize``) and the parts of a resumable flow; the rest
lives in its own modules: what is at a URL (``targets``), the run's lock (``locks``), staging and publishing
(``staging``), the residual template (``residual_template``) and its blocks (``residual_blocks``).
The CLI, the flows and the report hold a ``ResultStore`` (``result_store``), the store opened once,
whose methods call these functions.

dpaudit deletes only what it created: every root it writes carries ``dpaudit_store`` from its first
write (``is_dpaudit_store``), and ``remove``, ``discard``, ``publish`` and ``stale_stagings`` touch
nothing else (an empty directory aside). See docs/guarantees.md.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr
import zarr
import zarr.errors

from auditlib.exceptions import StoreError
from storage import checksums, files, root_document
from storage import schema as S

# the store's API in one namespace (``store.publish``, ``store.exclusive``, ...): its parts live in
# their own modules
from storage.locks import exclusive as exclusive
from storage.locks import lock_path as lock_path
from storage.residual_blocks import block_place as block_place
from storage.residual_blocks import done_blocks as done_blocks
from storage.residual_blocks import done_ranges as done_ranges
from storage.residual_blocks import pending_blocks as pending_blocks
from storage.residual_blocks import read_cells as read_cells
from storage.residual_blocks import read_items as read_items
from storage.residual_blocks import read_query_index as read_query_index
from storage.residual_blocks import read_residual_rows as read_residual_rows
from storage.residual_blocks import read_residuals as read_residuals
from storage.residual_blocks import replicate_chunk as replicate_chunk
from storage.residual_blocks import resume_point as resume_point
from storage.residual_blocks import seal_block as seal_block
from storage.residual_blocks import seal_pending as seal_pending
from storage.residual_blocks import template_complete as template_complete
from storage.residual_blocks import write_residual_block as write_residual_block
from storage.residual_template import create_residual_template as create_residual_template
from storage.residual_template import to_zarr
from storage.staging import discard as discard
from storage.staging import prepare_remote as prepare_remote
from storage.staging import publish as publish
from storage.staging import remove as remove
from storage.staging import staging_path as staging_path
from storage.staging import stale_stagings as stale_stagings
from storage.targets import absolute as absolute
from storage.targets import check_root, fs_path, not_ours
from storage.targets import check_target as check_target
from storage.targets import exists as exists
from storage.targets import group_attrs as group_attrs
from storage.targets import is_complete as is_complete
from storage.targets import is_dpaudit_store as is_dpaudit_store
from storage.targets import is_remote as is_remote
from storage.targets import root_attrs as root_attrs

if TYPE_CHECKING:
    pass


def write_group(url: str, group: str, ds: xr.Dataset) -> None:
    """Write a small group whole (one writer)."""
    to_zarr(_object_strings(ds), url, group=group, mode="w")
    record_checksums(url, group)


def _object_strings(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with its fixed-width strings as objects (as every group stores them)."""
    if not any(var.dtype.kind == "U" for var in ds.variables.values()):
        return ds
    ds = ds.copy()
    for name, var in ds.variables.items():
        if var.dtype.kind == "U":
            ds[name] = var.astype(object)
    return ds


def whole_chunks(length: int, dtype: Any) -> tuple[int, ...]:
    """The chunks zarr gives an array of ``length`` values of ``dtype`` written whole (its
    automatic choice, as :func:`write_group` leaves it; strings as ``str``)."""
    kind = np.dtype(dtype).kind
    arr = zarr.create_array(
        zarr.storage.MemoryStore(),
        shape=(int(length),),
        dtype=str if kind in "OUT" else np.dtype(dtype),
        chunks="auto",
    )
    return tuple(int(c) for c in arr.chunks)


def write_group_parts(url: str, group: str, parts: Iterable[xr.Dataset], rows: int) -> int:
    """Write a group of one long dimension in parts along it, in order, by one writer: the
    first part creates the group (its attributes and the variables not along that dimension),
    each next one is appended; every array is chunked as :func:`write_group` would chunk the
    whole ``rows``, so the group is the same, byte for byte, as one written whole. Then its
    checksums (read back in pieces) and its completion marker, as :func:`write_group`. Only one
    part's values are held at a time; returns the rows written (``rows``, else ``StoreError``)."""
    written, dim = 0, ""
    for part in parts:
        if not dim:
            if len(part.dims) != 1:
                raise StoreError(f"a group written in parts has one dimension, not {part.dims}")
            dim = str(next(iter(part.dims)))
        n = int(part.sizes[dim])
        if n == 0:
            continue
        ds = _object_strings(part)
        if written == 0:
            enc = {
                str(k): {"chunks": whole_chunks(rows, v.dtype)}
                for k, v in ds.variables.items()
                if v.dims == (dim,)
            }
            to_zarr(ds, url, group=group, mode="w", encoding=enc)
        else:
            to_zarr(ds, url, group=group, append_dim=dim)
        written += n
    if written != rows:
        raise StoreError(f"group {group!r}: {written} rows written in parts, not {rows}")
    record_checksums(url, group)
    return written


def record_checksums(url: str, group: str) -> None:
    """Record the digests of a group's arrays as stored, then mark the group complete."""
    grp = zarr.open_group(url, mode="r+", zarr_format=3, path=group)
    skip = S.RESIDUAL_BLOCK_VARS if group == S.RESIDUALS else ()
    grp.attrs.update(
        {S.SHA256_ATTR: checksums.group_digests(grp, skip), S.GROUP_COMPLETE_ATTR: True}
    )


def group_complete(url: str, group: str) -> bool:
    """Whether a group was written whole (its completion marker is set)."""
    root = zarr.open_group(url, mode="r", zarr_format=3)
    if group not in root:
        return False
    return bool(root[group].attrs.get(S.GROUP_COMPLETE_ATTR))


def set_root_attrs(url: str, attrs: Mapping[str, Any]) -> None:
    root = zarr.open_group(url, mode="r+", zarr_format=3)
    root.attrs.update({k: _jsonable(v) for k, v in attrs.items()})


def finalize(url: str) -> None:
    """Record missing checksums, mark the store complete and consolidate its metadata.

    The marker and the consolidated metadata end up in the root ``zarr.json``, written last: a store
    is complete only with both (``is_complete``), and ``xr.open_zarr(..., consolidated=True)``
    refuses a store whose run did not finish. The digests of that root document and of every
    consolidated copy in it go into it last (``root_document.seal_root``).
    """
    for name in groups(url):
        if not group_complete(url, name):
            record_checksums(url, name)
    # every node's own metadata is final now (consolidation rewrites only the root's)
    meta = checksums.metadata_digests(url)
    set_root_attrs(url, {S.STORE_ATTR: True, S.METADATA_SHA256_ATTR: meta, S.COMPLETE_ATTR: True})
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning)
        zarr.consolidate_metadata(url, zarr_format=3)
    root_document.seal_root(url)  # the root document and its consolidated copies, last


def open_group(url: str, group: str, **kw: Any) -> xr.Dataset:
    """Open one group of a completed store as an xarray Dataset (numpy-backed by default)."""
    check_root(url)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning)
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        return dataset(url, group, **kw)


def zarr_group(
    url: str, path: str = "", mode: str = "r", storage_options: Mapping[str, Any] | None = None
) -> zarr.Group:
    """The Zarr group at ``path`` of the store at ``url``, as it is (a staging store too), opened
    in ``mode`` (zarr's: ``"r"``, ``"r+"``, ``"a"``)."""
    kw: dict[str, Any] = {"storage_options": dict(storage_options)} if storage_options else {}
    return zarr.open_group(url, mode=mode, zarr_format=3, path=path, **kw)  # type: ignore[arg-type]


def dataset(
    url: str,
    group: str,
    *,
    consolidated: bool = True,
    chunks: Any = None,
    storage_options: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """One group of the store at ``url`` as an xarray Dataset, as it is (no check that the store
    is complete; ``chunks=None``: numpy-backed, lazily read). Raises what xarray raises for a
    group that is not there."""
    return xr.open_zarr(
        url,
        group=group,
        consolidated=consolidated,
        chunks=chunks,
        storage_options=dict(storage_options) if storage_options else None,
    )


def groups(url: str) -> list[str]:
    """Names of the groups a store holds."""
    check_root(url)
    return sorted(name for name, _ in zarr.open_group(url, mode="r", zarr_format=3).groups())


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, dict):
        return json.loads(json.dumps(v, default=str))
    return v


# --- per-chunk parts of a resumable flow (mpl-coverage, direct) --------------------------------
#: the array of a parts group whose nonzero entries mark finished chunks (written last per chunk)
PART_DONE = "part_done"


def claim_staging(url: str, run_id: str) -> bool:
    """Create the root of a run's store keyed by ``run_id``, or check an existing one is this run's.

    Returns whether the store already existed (a resumed run). A store of another run (another
    command or spec) is refused: its parts would not fit this run's.
    """
    if exists(url):
        files.check_documents(url)
        held = root_attrs(url).get("run_id")
        if held != run_id:
            raise StoreError(
                f"store {url!r} holds an unfinished run of a different command (run id {held!r}, "
                f"this command {run_id!r}); pass --overwrite to replace it, or choose another "
                "--store"
            )
        return True
    zarr.open_group(
        url, mode="w-", zarr_format=3, attributes={"run_id": run_id, S.STORE_ATTR: True}
    )
    return False


def chunk_parts(
    url: str,
    group: str,
    arrays: Mapping[str, tuple[tuple[int, ...], tuple[int, ...], str]],
    markers: tuple[int, ...],
) -> set[tuple[int, ...]]:
    """Open the parts group of a chunked run, creating its template if missing; return the indices
    of the chunks already finished (their ``part_done`` marker set).

    ``arrays`` maps a name to (shape, chunks, dtype); floats are filled with NaN, strings (``"str"``)
    with ``""``, others with 0.
    ``markers`` is the shape of the chunk grid. A template left half-written is rebuilt.
    """
    root = zarr.open_group(url, mode="r+", zarr_format=3)
    if group in root and root[group].attrs.get(S.TEMPLATE_COMPLETE_ATTR):
        return done_parts(url, group)
    grp = root.create_group(group, overwrite=True)
    for name, (shape, chunks, dtype) in arrays.items():
        kind = np.dtype(dtype).kind
        fill: Any = np.nan if kind == "f" else "" if kind in "UT" else 0
        grp.create_array(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill)
    grp.create_array(
        PART_DONE, shape=markers, chunks=(1,) * len(markers), dtype="uint8", fill_value=0
    )
    grp.attrs[S.TEMPLATE_COMPLETE_ATTR] = True  # last: a resumed run may write into it
    return set()


def _parts_array(url: str, group: str, name: str, mode: str = "r") -> zarr.Array:
    arr = zarr.open_group(url, mode=mode, zarr_format=3, path=group)[name]  # type: ignore[arg-type]
    if not isinstance(arr, zarr.Array):
        raise StoreError(f"{group}/{name} in {url!r} is not an array")
    return arr


def write_part(
    url: str,
    group: str,
    marker: tuple[int, ...],
    values: Mapping[str, tuple[tuple[int | slice, ...], np.ndarray]],
) -> None:
    """Write one chunk's results (each a chunk-aligned region of its array), then its marker."""
    for name, (index, value) in values.items():
        arr = _parts_array(url, group, name, mode="r+")
        for dim, (i, size, c) in enumerate(zip(index, arr.shape, arr.chunks, strict=True)):
            lo, hi = (
                (i.start or 0, size if i.stop is None else i.stop)
                if isinstance(i, slice)
                else (i, i + 1)
            )
            if lo % c or (hi % c and hi != size):
                raise StoreError(
                    f"region {index} of {group}/{name} is not chunk-aligned in dim {dim} "
                    f"(chunks {arr.chunks}); each chunk must be written by one task"
                )
        arr[index] = value
    _parts_array(url, group, PART_DONE, mode="r+")[marker] = 1


def done_parts(url: str, group: str) -> set[tuple[int, ...]]:
    """Indices of the chunks whose writes completed (their ``part_done`` marker is set)."""
    marks = np.asarray(_parts_array(url, group, PART_DONE)[...])
    return {tuple(int(x) for x in idx) for idx in zip(*np.nonzero(marks), strict=True)}


def read_parts(url: str, group: str) -> dict[str, np.ndarray]:
    """Every array of a parts group, as numpy."""
    grp = zarr.open_group(url, mode="r", zarr_format=3, path=group)
    return {name: np.asarray(arr[...]) for name, arr in grp.arrays()}


def drop_group(url: str, group: str) -> None:
    """Remove a group (the parts of a run, once assembled into its final group) of a dpaudit store."""
    if not is_dpaudit_store(url):
        raise StoreError(f"refusing to drop {group!r}: {not_ours(url, 'foreign')}")
    fs, path = fs_path(f"{str(url).rstrip('/')}/{group}")
    if fs.exists(path):
        fs.rm(path, recursive=True)
