"""A persistent cache of whole accounting results, keyed by a hash of everything they depend on.

Where it lives: ``$DPAUDIT_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/dpaudit``, else
``~/.cache/dpaudit``; entries are ``accounting/<key>.npz`` files there (a few kB each).

The key (:func:`result_key`) is the SHA-256 of a canonical JSON of the inputs: the caller's
description of the request plus :func:`code_version` (the package version and the bytes of the
accounting code), so an entry is never trusted across versions or code changes. Invalidation is by
key only: a changed input or code gives a new key and the old entry is simply never read again
(delete the directory to reclaim the space).

An entry holds the arrays, the scalars (JSON) and a SHA-256 digest of both; :func:`load` recomputes
the digest and returns ``None`` (the caller recomputes and rewrites) for a missing, unreadable,
truncated or altered entry, or one stored under another key. :func:`save` writes a temporary file
in the same directory and renames it over the entry (atomic on POSIX), so concurrent writers of the
same key leave one complete entry and a reader never sees half of one.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from functools import cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import numpy as np

#: environment variable naming the cache directory
CACHE_DIR_ENV = "DPAUDIT_CACHE_DIR"
#: bump when the entry layout changes
SCHEMA = 1
#: the modules whose bytes enter :func:`code_version`
_CODE_PACKAGES = ("auditlib.accounting",)
_CODE_MODULES = ("summaries.py", "allocations.py", "allocation_file.py")


def cache_dir() -> Path:
    """The cache's root directory (see the module docstring); not created here."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "dpaudit"


@cache
def code_version() -> str:
    """Package version plus a digest of the accounting code's source files."""
    h = hashlib.sha256()
    try:
        h.update(metadata.version("dpaudit").encode())
    except metadata.PackageNotFoundError:
        h.update(b"unknown")
    root = resources.files("auditlib")
    paths = [root / name for name in _CODE_MODULES]
    paths += sorted(
        (p for p in (root / "accounting").iterdir() if p.name.endswith(".py")),
        key=lambda p: p.name,
    )
    for p in paths:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def array_digest(a: np.ndarray) -> str:
    """SHA-256 of an array's dtype, shape and bytes (for keys)."""
    a = np.ascontiguousarray(a)
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())
    return h.hexdigest()


def result_key(kind: str, inputs: dict[str, Any]) -> str:
    """The entry key of a result of ``kind`` computed from ``inputs`` (JSON-serialisable)."""
    doc = {"schema": SCHEMA, "kind": kind, "code": code_version(), "inputs": inputs}
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def entry_path(key: str, root: Path | None = None) -> Path:
    return (root if root is not None else cache_dir()) / "accounting" / f"{key}.npz"


def _split(result: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    scalars: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for name, value in result.items():
        if isinstance(value, np.ndarray):
            arrays[name] = value
        elif value is None or isinstance(value, bool | int | float | str):
            scalars[name] = value
        else:
            raise TypeError(f"cannot cache {name}={value!r}: not an array, number or string")
    return scalars, arrays


def _digest(key: str, meta: bytes, arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256(key.encode() + b"\0" + meta + b"\0")
    for name in sorted(arrays):
        h.update(name.encode() + b"\0" + array_digest(arrays[name]).encode())
    return h.hexdigest()


def save(key: str, result: dict[str, Any], root: Path | None = None) -> Path:
    """Store ``result`` (arrays, numbers, strings) under ``key``; atomic (temporary file + rename)."""
    scalars, arrays = _split(result)
    meta = json.dumps({"key": key, "scalars": scalars}, sort_keys=True, allow_nan=True).encode()
    digest = _digest(key, meta, arrays)
    buf = io.BytesIO()
    payload: dict[str, Any] = {f"a_{n}": np.ascontiguousarray(a) for n, a in arrays.items()}
    payload["__meta__"] = np.frombuffer(meta, dtype=np.uint8)
    payload["__digest__"] = np.array(digest)
    np.savez(buf, **payload)
    path = entry_path(key, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(buf.getvalue())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(key: str, root: Path | None = None) -> dict[str, Any] | None:
    """The result stored under ``key``, or ``None`` if absent or not verifiably intact."""
    path = entry_path(key, root)
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = z["__meta__"].tobytes()
            stored = str(z["__digest__"])
            arrays = {n[2:]: z[n] for n in z.files if n.startswith("a_")}
        if _digest(key, meta, arrays) != stored:
            return None
        doc = json.loads(meta)
        if doc.get("key") != key:
            return None
    except Exception:  # missing, truncated, not an npz, bad JSON: recompute
        return None
    return {**doc["scalars"], **arrays}
