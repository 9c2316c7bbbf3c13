"""Integrity of result stores: sha256 digests recorded when data is written, verified before reading.

Two kinds of digests, both over array *values* as read back through zarr (so a missing chunk file,
which zarr silently reads as fill values, is caught as well as a corrupt one):

- per (state, geolevel) block of every residual variable: ``residuals/block_sha256(state, geolevel,
  block_var, byte)`` (uint8, one chunk per block), written right after the block's data. A block
  whose digest row is still zero has not been written (the resume marker).
- per whole array of every other variable and coordinate: the group attribute ``dpaudit_sha256``
  ({name: hex digest}), written after the group's data, together with the group's completion marker.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zarr

from auditlib.exceptions import IntegrityError
from storage import schema as S


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


def block_digests(arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """(n_block_vars, 32) uint8: the digest of each residual block variable, in schema order."""
    return np.stack(
        [np.frombuffer(digest(arrays[name]), np.uint8) for name in S.RESIDUAL_BLOCK_VARS]
    )


def group_digests(group: zarr.Group, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """{array name: hex digest} of every array of a group (as stored), except ``skip``."""
    return {
        name: digest(arr[...]).hex()
        for name, arr in group.arrays()
        if name not in skip and name != S.BLOCK_SHA256
    }


@dataclass
class Verification:
    """What ``verify`` checked and what it found wrong (empty ``problems``: the store is intact)."""

    arrays: int = 0
    blocks: int = 0
    problems: list[str] = field(default_factory=list)


def verify(url: str, storage_options: dict[str, Any] | None = None) -> Verification:
    """Recompute every recorded digest of a completed store; collect every mismatch or read error."""
    out = Verification()
    try:
        root = zarr.open_group(url, mode="r", zarr_format=3, storage_options=storage_options)
    except Exception as exc:
        raise IntegrityError(f"cannot open store {url!r}: {type(exc).__name__}: {exc}") from exc
    if not root.attrs.get(S.COMPLETE_ATTR):
        raise IntegrityError(
            f"store {url!r} is not a completed dpaudit store (no {S.COMPLETE_ATTR!r} marker): its "
            "run was interrupted or is still running; re-run the same spec to finish it"
        )
    for gname, grp in sorted(root.groups()):
        recorded: dict[str, Any] = dict(grp.attrs.get(S.SHA256_ATTR) or {})  # type: ignore[arg-type]
        names = sorted(n for n, _ in grp.arrays())
        for name in names:
            if name == S.BLOCK_SHA256 or (gname == S.RESIDUALS and name in S.RESIDUAL_BLOCK_VARS):
                continue
            where = f"{gname}/{name}"
            if name not in recorded:
                out.problems.append(f"{where}: no checksum recorded")
                continue
            out.arrays += 1
            try:
                got = digest(_read(grp, name)).hex()
            except Exception as exc:
                out.problems.append(f"{where}: unreadable ({type(exc).__name__}: {exc})")
                continue
            if got != recorded[name]:
                out.problems.append(f"{where}: checksum mismatch (missing or corrupt chunk)")
        if gname == S.RESIDUALS:
            _verify_blocks(grp, out)
    return out


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
                    got = digest(_read(grp, name, slice(s, s + 1), slice(g, g + 1)))
                except Exception as exc:
                    out.problems.append(f"{where}: unreadable ({type(exc).__name__}: {exc})")
                    continue
                if got != recorded[s, g, v].tobytes():
                    out.problems.append(f"{where}: checksum mismatch (missing or corrupt chunk)")


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
