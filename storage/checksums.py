"""Integrity of result stores: sha256 digests recorded when data is written, verified before reading.

Two kinds of digests, both over array *values* as read back through zarr (so a missing chunk file,
which zarr silently reads as fill values, is caught as well as a corrupt one):

- per (state, geolevel) block of every residual variable: ``residuals/block_sha256(state, geolevel,
  block_var, byte)`` (uint8, one chunk per block), written right after the block's data: of the
  whole chunks its items take on the item axis (its items and the padding to their last chunk's
  end; in a layout-2 or -3 store, of its capacity's chunks; ``storage/residuals.py``), or in a
  layout-1 store of its padded (state, geolevel) slab. A block
  whose digest row is still zero has not been written (the resume marker). In a layout-3 or -4 store the
  residual's entry is the sha256 of its replicates' digests (``split_digest``), and
  ``residuals/replicate_sha256(state, geolevel, replicate, byte)`` holds the digest of each
  replicate's row of the block, written after the row by the task of its replicate range (the
  completion marker of that range); the block's row in ``block_sha256`` follows once all are set.
- per whole array of every other variable and coordinate: the group attribute ``dpaudit_sha256``
  ({name: hex digest}), written after the group's data, together with the group's completion marker.

And two over metadata: the sha256 of the bytes of every group's and array's own ``zarr.json`` (all
but the root's), in the root attribute ``dpaudit_metadata_sha256`` ({path relative to the root:
hex digest}), recorded when the store is finalized; and, once the metadata is consolidated, the
digests of the root ``zarr.json`` itself (its attributes: the seed, the spec, the records above)
and of each consolidated copy of a node's metadata in it, in ``dpaudit_root_sha256`` (over
canonical JSON, that record left out: a document cannot hold its own digest). Readers use the
consolidated copies, which hide a damaged node document from everything but a reader that opens
the node itself (``consolidated=False``); ``verify`` reads each document as bytes and the root as
JSON. Stores finalized before either record existed verify what they record, with a note naming
what was not checked and how to record it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zarr

from auditlib.exceptions import IntegrityError
from storage import files, root_document
from storage import schema as S
from storage.residuals import REPLICATE_SHA256, layout_of, pieces, spans, split_digest


def digest(values: Any) -> bytes:
    """sha256 of an array's shape, kind and values (strings as UTF-8, NUL-separated)."""
    a = np.asarray(values)
    h = hashlib.sha256()
    h.update(repr(a.shape).encode())
    if a.dtype.kind in "OUT":  # object, fixed-width and StringDType strings hash alike
        h.update(b"str:")
        h.update("\x00".join(str(x) for x in a.ravel()).encode())
    else:
        h.update(a.dtype.str.encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.digest()


class DigestStream:
    """:func:`digest` of a 1-D array of ``length`` values of a numeric ``dtype``, fed in pieces in
    order (``update``), so a block too large to hold twice is digested as it is written or read."""

    def __init__(self, length: int, dtype: Any) -> None:
        self.dtype = np.dtype(dtype)
        self.left = int(length)
        self._h = hashlib.sha256()
        self._h.update(repr((self.left,)).encode())
        self._h.update(self.dtype.str.encode())

    def update(self, piece: np.ndarray) -> None:
        a = np.ascontiguousarray(piece)
        if a.dtype != self.dtype or a.ndim != 1 or a.size > self.left:
            raise ValueError(
                f"a piece of {a.size} {a.dtype} values (ndim {a.ndim}) does not continue "
                f"{self.left} {self.dtype} values still to digest"
            )
        self.left -= a.size
        self._h.update(a.data.cast("B"))

    def digest(self) -> bytes:
        if self.left:
            raise ValueError(f"{self.left} values are still to digest")
        return self._h.digest()


#: the values of one piece an array is digested in (:func:`array_digest`): whole chunks of it
DIGEST_PIECE = 2**20


def array_digest(arr: Any, piece: int = DIGEST_PIECE) -> bytes:
    """:func:`digest` of a stored array, a 1-D one read in pieces of whole chunks (about
    ``piece`` values each), so a long table is digested without holding it whole; the same
    bytes as ``digest(arr[...])``."""
    shape = tuple(int(n) for n in arr.shape)
    if len(shape) != 1 or shape[0] <= piece:
        return digest(arr[...])
    n, chunk = shape[0], int(arr.chunks[0])
    step = chunk * max(1, piece // chunk)
    h = hashlib.sha256()
    h.update(repr(shape).encode())
    for a in range(0, n, step):
        values = np.asarray(arr[a : min(a + step, n)])
        text = values.dtype.kind in "OUT"
        if a == 0:  # the header as :func:`digest` writes it, of the values as read
            h.update(b"str:" if text else values.dtype.str.encode())
        if text:  # NUL-separated across pieces as within one
            h.update(("\x00" if a else "").encode() + "\x00".join(map(str, values)).encode())
        else:
            h.update(np.ascontiguousarray(values).tobytes())
    return h.digest()


def block_digests(arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """(n_block_vars, 32) uint8: the digest of each residual block variable, in schema order."""
    return np.stack(
        [np.frombuffer(digest(arrays[name]), np.uint8) for name in S.RESIDUAL_BLOCK_VARS]
    )


def group_digests(group: zarr.Group, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """{array name: hex digest} of every array of a group (as stored), except ``skip``."""
    return {
        name: array_digest(arr).hex()
        for name, arr in sorted(group.arrays(), key=lambda na: na[0])  # same bytes every run
        if name not in skip and name not in (S.BLOCK_SHA256, REPLICATE_SHA256)
    }


#: the note ``verify`` gives a store finalized before metadata digests were recorded
NO_METADATA_DIGESTS = (
    f"no metadata digests recorded (no {S.METADATA_SHA256_ATTR!r}: a store written by an older "
    "dpaudit): the data was checked, each node's own zarr.json was not"
)


def _metadata_files(url: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """{path relative to the root: full path} of every node's own ``zarr.json`` but the root's."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
    root = str(root).rstrip("/")
    out = {}
    for path in fs.find(root):
        rel = str(path)[len(root) + 1 :]
        if rel.endswith("/zarr.json"):
            out[rel] = (fs, path)
    return out


def metadata_digests(url: str, storage_options: dict[str, Any] | None = None) -> dict[str, str]:
    """{``group/array/zarr.json``: sha256 hex of its bytes} of every node below the root."""
    return {
        rel: hashlib.sha256(files.read_document(path, fs)).hexdigest()
        for rel, (fs, path) in sorted(_metadata_files(url, storage_options).items())
    }


@dataclass
class Verification:
    """What ``verify`` checked and what it found wrong (empty ``problems``: the store is intact);
    ``notes``: what it could not check (not a failure)."""

    arrays: int = 0
    blocks: int = 0
    metadata: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def verify(url: str, storage_options: dict[str, Any] | None = None) -> Verification:
    """Recompute every recorded digest of a completed store; collect every mismatch or read error."""
    out = Verification()
    if storage_options is None:  # (with options, the documents are read bounded below)
        files.check_documents(url)  # every metadata document a regular file of bounded size
    try:
        root = zarr.open_group(url, mode="r", zarr_format=3, storage_options=storage_options)
    except Exception as exc:
        raise IntegrityError(f"cannot open store {url!r}: {type(exc).__name__}: {exc}") from exc
    if not root.attrs.get(S.COMPLETE_ATTR):
        raise IntegrityError(
            f"store {url!r} is not a completed dpaudit store (no {S.COMPLETE_ATTR!r} marker): its "
            "run was interrupted or is still running; re-run the same spec to finish it"
        )
    root_document.verify_root(url, storage_options, out)
    recorded_meta = root.attrs.get(S.METADATA_SHA256_ATTR)
    if isinstance(recorded_meta, dict):
        _verify_metadata(url, storage_options, recorded_meta, out)
    else:
        out.notes.append(NO_METADATA_DIGESTS)
    for gname, grp in sorted(root.groups()):
        recorded: dict[str, Any] = dict(grp.attrs.get(S.SHA256_ATTR) or {})  # type: ignore[arg-type]
        names = sorted(n for n, _ in grp.arrays())
        for name in names:
            if name in (S.BLOCK_SHA256, REPLICATE_SHA256) or (
                gname == S.RESIDUALS and name in S.RESIDUAL_BLOCK_VARS
            ):
                continue
            where = f"{gname}/{name}"
            if name not in recorded:
                out.problems.append(f"{where}: no checksum recorded")
                continue
            out.arrays += 1
            try:
                got = array_digest(grp[name]).hex()
            except Exception as exc:
                out.problems.append(f"{where}: unreadable ({type(exc).__name__}: {exc})")
                continue
            if got != recorded[name]:
                out.problems.append(f"{where}: checksum mismatch (missing or corrupt chunk)")
        if gname == S.RESIDUALS:
            _verify_blocks(grp, out)
    return out


def _verify_metadata(
    url: str, storage_options: dict[str, Any] | None, recorded: dict[str, Any], out: Verification
) -> None:
    """Each node's own ``zarr.json`` against its recorded digest: changed, missing or added."""
    try:
        found = _metadata_files(url, storage_options)
    except Exception as exc:
        out.problems.append(f"metadata: cannot list the store ({type(exc).__name__}: {exc})")
        return
    for rel in sorted(set(recorded) | set(found)):
        if rel not in found:
            out.problems.append(f"{rel}: missing (its metadata digest is recorded)")
            continue
        if rel not in recorded:
            out.problems.append(f"{rel}: no metadata digest recorded (added after the run)")
            continue
        out.metadata += 1
        fs, path = found[rel]
        try:
            got = hashlib.sha256(files.read_document(path, fs)).hexdigest()
        except Exception as exc:
            out.problems.append(f"{rel}: unreadable ({type(exc).__name__}: {exc})")
            continue
        if got != recorded[rel]:
            out.problems.append(f"{rel}: metadata checksum mismatch (corrupt or changed)")


def _read(grp: zarr.Group, name: str, *index: Any) -> np.ndarray:
    arr: Any = grp[name]
    return np.asarray(arr[index] if index else arr[...])


def _verify_blocks(grp: zarr.Group, out: Verification) -> None:
    states = [str(x) for x in _read(grp, S.STATE)]
    levels = [str(x) for x in _read(grp, S.GEOLEVEL)]
    if S.BLOCK_SHA256 not in grp:
        out.problems.append(f"{S.RESIDUALS}/{S.BLOCK_SHA256}: missing; blocks cannot be checked")
        return
    try:
        recorded = _read(grp, S.BLOCK_SHA256)
    except Exception as exc:
        out.problems.append(f"{S.RESIDUALS}/{S.BLOCK_SHA256}: unreadable ({exc})")
        return
    flat = "item_offset" in grp  # layout 2: blocks on one item axis; else padded (s, g) blocks
    split = REPLICATE_SHA256 in grp  # layout 3: a digest per replicate row of each block
    # layout 4: a block is written as the chunks of its items; before, of its capacity
    written = "n_items" if layout_of(dict(grp.attrs)) >= 4 else "item_capacity"
    try:
        places = (_read(grp, "item_offset"), _read(grp, written)) if flat else None
    except Exception as exc:
        out.problems.append(f"{S.RESIDUALS}/item_offset: unreadable ({exc}); blocks not checked")
        return
    for s, st in enumerate(states):
        for g, gl in enumerate(levels):
            out.blocks += 1
            label = f"block (state={st}, geolevel={gl})"
            if not recorded[s, g].any():
                out.problems.append(f"{S.RESIDUALS}: {label} was never written")
                continue
            for v, name in enumerate(S.RESIDUAL_BLOCK_VARS):
                where = f"{S.RESIDUALS}/{name} {label}"
                try:
                    if places is None or name == "n_items":
                        index = (slice(s, s + 1), slice(g, g + 1))
                        ok = digest(_read(grp, name, *index)) == recorded[s, g, v].tobytes()
                    elif name == "residual" and split:
                        _verify_replicates(grp, s, g, places, recorded[s, g, v], where, out)
                        continue
                    elif name == "residual":  # layout 2: the block's rows as one array
                        items = _place(grp, places, s, g)
                        ok = (
                            digest(_read(grp, name, slice(None), items))
                            == recorded[s, g, v].tobytes()
                        )
                    else:
                        ok = slice_digest(grp[name], _place(grp, places, s, g)) == (
                            recorded[s, g, v].tobytes()
                        )
                except Exception as exc:
                    out.problems.append(f"{where}: unreadable ({type(exc).__name__}: {exc})")
                    continue
                if not ok:
                    out.problems.append(f"{where}: checksum mismatch (missing or corrupt chunk)")


def _place(grp: zarr.Group, places: tuple[np.ndarray, np.ndarray], s: int, g: int) -> slice:
    """The items a block was written as: its offset, and its items or (before layout 4) its
    capacity rounded up to whole chunks."""
    off, chunk = int(places[0][s, g]), int(grp["truth"].chunks[0])  # type: ignore[union-attr]
    return slice(off, off + int(spans(int(places[1][s, g]), chunk)))


def slice_digest(arr: Any, items: slice) -> bytes:
    """:func:`digest` of a 1-D stored array over ``items``, read in pieces of whole chunks."""
    h = DigestStream(items.stop - items.start, arr.dtype)
    for a, b in pieces(items.stop - items.start, int(arr.chunks[0]), 1):
        h.update(np.asarray(arr[items.start + a : items.start + b]))
    return h.digest()


def _verify_replicates(
    grp: zarr.Group,
    s: int,
    g: int,
    places: tuple[np.ndarray, np.ndarray],
    recorded: np.ndarray,
    where: str,
    out: Verification,
) -> None:
    """A layout-3 or -4 block's residual: each replicate's row against its digest (read in
    pieces), the digests against the block's checksum."""
    items = _place(grp, places, s, g)
    arr: Any = grp["residual"]
    try:
        reps = _read(grp, REPLICATE_SHA256, s, g)
        rows = [DigestStream(items.stop - items.start, arr.dtype) for _ in range(arr.shape[0])]
        for a, b in pieces(items.stop - items.start, int(arr.chunks[1]), arr.shape[0]):
            piece = np.asarray(arr[:, items.start + a : items.start + b])
            for h, row in zip(rows, piece, strict=True):
                h.update(row)
    except Exception as exc:
        out.problems.append(f"{where}: unreadable ({type(exc).__name__}: {exc})")
        return
    if split_digest(reps) != recorded.tobytes():
        out.problems.append(f"{where}: replicate digests do not match the block's checksum")
    bad = [k for k, h in enumerate(rows) if h.digest() != reps[k].tobytes()]
    if bad:
        shown = ", ".join(map(str, bad[:5])) + (" …" if len(bad) > 5 else "")
        out.problems.append(
            f"{where}: checksum mismatch in replicate(s) {shown} (missing or corrupt chunk)"
        )


def check(url: str, storage_options: dict[str, Any] | None = None) -> Verification:
    """``verify`` that raises ``IntegrityError`` naming the first problems."""
    v = verify(url, storage_options)
    if v.problems:
        shown = "; ".join(v.problems[:5])
        more = f" (and {len(v.problems) - 5} more)" if len(v.problems) > 5 else ""
        raise IntegrityError(
            f"store {url!r} failed its integrity check: {shown}{more}; re-run the audit "
            "(with --overwrite) to rebuild it"
        )
    return v
