"""Checks of a command's files before any work: the spec it reads (readable, UTF-8, valid) and every
path it will write (a store, a report, a curve), so that bad input exits 2 with nothing written.

An output path is refused when it is an existing directory where a file is due, a FIFO, a device, a
socket or a dangling symbolic link (even with ``--overwrite``), when an existing file is in the way
(without ``--overwrite``), when a component of its parent is a regular file, when
its directory is missing (for single files written by quick commands) and when that directory
cannot be written: tried by creating and removing a temporary file, since permission bits alone say
nothing to root or of a read-only file system.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditlib.exceptions import SpecError, StoreError

if TYPE_CHECKING:
    from storage.result_store import ResultStore


def load_spec(path: str | Path | None) -> Any:
    """The validated spec at ``path`` (None: the shipped default); a file that cannot be read or is
    not UTF-8 text raises :class:`SpecError` naming it and the first bad byte."""
    from flows.spec import load_spec as load

    if path is not None and Path(path).is_file():
        p = Path(path)
        try:
            raw = p.read_bytes()
        except OSError as exc:
            raise SpecError(f"cannot read spec {str(p)!r}: {exc.strerror or exc}") from None
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise SpecError(
                f"spec {str(p)!r} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at byte position "
                f"{exc.start} (line {line}: {exc.reason}); save the spec as UTF-8"
            ) from None
    return load(path)


def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (as anything)."""
    p = path
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def check_writable_dir(directory: Path, what: str) -> None:
    """Raise :class:`StoreError` unless a file can be created (and removed) in ``directory``."""
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".dpaudit-write-check-")
    except OSError as exc:
        raise StoreError(
            f"{what}: cannot write in directory {str(directory)!r} ({exc.strerror or exc}); "
            "choose a writable place"
        ) from None
    os.close(fd)
    os.unlink(probe)


def check_parents(path: Path, what: str, *, create: bool) -> None:
    """The directory ``path`` goes into: every existing component a directory, writable; missing
    directories allowed only with ``create`` (they are made when the output is written)."""
    parent = path.absolute().parent
    base = _nearest_existing(parent)
    if not base.is_dir():
        raise StoreError(
            f"{what} {str(path)!r}: {str(base)!r} is a file, not a directory; choose another path"
        )
    if base != parent and not create:
        raise StoreError(
            f"{what} {str(path)!r}: directory {str(parent)!r} not found; create it or choose "
            "another path"
        )
    check_writable_dir(base, f"{what} {str(path)!r}")


def check_output_file(path: str | Path, overwrite: bool, what: str, *, create: bool) -> None:
    """A single output file (a report, a curve, a table): nothing there, or a regular file (only
    with ``overwrite``) — never a directory, a FIFO, a device, a socket or a dangling link, not even
    with ``overwrite`` — in a writable directory (missing directories only with ``create``). Every
    command checks its file outputs here before any work."""
    from storage import files

    files.check_file_target(path, overwrite, what)
    p = Path(path)
    check_parents(p, what, create=create)


def check_store_target(store: ResultStore, overwrite: bool) -> None:
    """An output store: not in the way of an existing one unless ``overwrite``
    (``storage.targets.check_target``, on the path as given), and, if local, in a writable
    directory."""
    store.check_target(overwrite)
    if not store.remote:
        check_parents(Path(store.shown), "output store", create=True)


def check_store_exists(store: ResultStore) -> None:
    """A store to read (``verify``, ``report``): an existing directory with Zarr metadata."""
    url = store.shown
    if store.remote:
        if not store.exists():
            raise StoreError(f"store {url!r} not found; give a result store path or URL")
        store.check_documents()
        return
    p = Path(url)
    if not p.exists():
        raise StoreError(f"store {url!r} not found; give a result store path or URL")
    if not p.is_dir():
        raise StoreError(f"store {url!r} is a file, not a result store; give the store directory")
    if not store.exists():
        raise StoreError(
            f"{url!r} is not a result store (no zarr.json); give the directory a run wrote (--store)"
        )
    store.check_documents()  # before zarr reads any: regular files of bounded size
