"""What a local path is, in the words of an error message: dpaudit writes only regular files and its
own store directories, and never opens a FIFO, a device or a socket where it expects either; and
the metadata documents (``zarr.json``) of a store, checked to be regular files of bounded size
before anything (zarr included) reads them."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

#: the kinds :func:`kind` names that are neither nothing, a regular file nor a directory
SPECIAL = {
    stat.S_IFIFO: "FIFO (named pipe)",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFSOCK: "socket",
}


def kind(path: str | os.PathLike[str]) -> str:
    """What ``path`` is, following symbolic links: ``none`` (nothing there), ``file`` (a regular
    file), ``directory``, ``dangling symbolic link``, or the special file it is (``FIFO (named
    pipe)``, ``character device``, ``block device``, ``socket``)."""
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        return "dangling symbolic link" if os.path.islink(p) else "none"
    except NotADirectoryError:  # a component of its parent is a file: nothing can be there
        return "none"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    return SPECIAL.get(stat.S_IFMT(mode), "special file")


def is_special(what: str) -> bool:
    """Whether :func:`kind` named something that is neither nothing, a file nor a directory."""
    return what not in ("none", "file", "directory")


def check_file_target(path: str | os.PathLike[str], overwrite: bool, what: str) -> None:
    """The one check of a file dpaudit is about to write (a report, a curve, a table): nothing
    there, or a regular file (only with ``overwrite``); never a directory, a FIFO, a device, a
    socket or a dangling link, not even with ``overwrite``. ``what`` names it in the message."""
    from auditlib.exceptions import StoreError

    p = Path(path)
    found = kind(p)
    if found == "directory":
        raise StoreError(f"{what} {str(p)!r} is a directory; give a file name")
    if is_special(found) or (found == "none" and os.path.lexists(p)):
        raise StoreError(
            f"{what} {str(p)!r} is a {found}, not a regular file; dpaudit writes only regular "
            "files and never replaces anything else, even with --overwrite: choose another path"
        )
    if found == "file" and not overwrite:
        raise StoreError(
            f"{what} {str(p)!r} already exists; pass --overwrite to replace it, or choose "
            "another path"
        )


# --- metadata documents -------------------------------------------------------------------------

MAX_DOCUMENT_BYTES = 64 * 2**20
"""Largest metadata document (``zarr.json``) dpaudit reads: 64 MiB. A store's largest, the root's
with its consolidated copies, holds a few hundred kilobytes; beyond the cap a document is damaged
or not a store's (``/dev/zero`` never ends)."""

DOCUMENT = "zarr.json"


def _refuse(where: str, found: str, size: int | None = None) -> Exception:
    from auditlib.exceptions import StoreError

    what = (
        f"is a {found}, not a regular file"
        if size is None
        else f"holds {size:,} bytes, more than the {MAX_DOCUMENT_BYTES // 2**20} MiB a metadata "
        "document may hold (MAX_DOCUMENT_BYTES)"
    )
    return StoreError(
        f"metadata document {where!r} {what}; it is not read: the store is damaged or not "
        "dpaudit's, so give another store (or move this one away and run the audit again)"
    )


def read_document(path: str, fs: Any = None) -> bytes:
    """The bytes of a metadata document, checked first to be a regular file of at most
    :data:`MAX_DOCUMENT_BYTES` (a FIFO would block, a device never end); ``fs``: the fsspec file
    system of a remote one (``None``: a local path). Raises ``StoreError`` naming it otherwise,
    ``FileNotFoundError`` if it is absent."""
    if fs is not None and not _is_local(fs):
        info = fs.info(path)
        size = int(info.get("size") or 0)
        if info.get("type") != "file":
            raise _refuse(str(path), str(info.get("type")))
        if size > MAX_DOCUMENT_BYTES:
            raise _refuse(str(path), "file", size)
        return bytes(fs.cat_file(path))
    found = kind(path)
    if found == "none":
        raise FileNotFoundError(path)
    if found != "file":
        raise _refuse(str(path), found)
    with open(path, "rb") as fh:  # a regular file (a link resolved): opening it cannot block
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_DOCUMENT_BYTES:
            raise _refuse(str(path), "file", size)
        data = fh.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:  # grew since
        raise _refuse(str(path), "file", len(data))
    return data


def _is_local(fs: Any) -> bool:
    return "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))


def check_document(path: str | os.PathLike[str]) -> None:
    """A local metadata document that exists: a regular file (links followed) of at most
    :data:`MAX_DOCUMENT_BYTES`, or ``StoreError`` naming it (nothing is opened)."""
    found = kind(path)
    if found != "file":
        raise _refuse(str(path), found)
    size = os.stat(path).st_size
    if size > MAX_DOCUMENT_BYTES:
        raise _refuse(str(path), "file", size)


def check_documents(url: str) -> int:
    """Check, before zarr reads any of them, that every metadata document of the store at ``url``
    is a regular file of at most :data:`MAX_DOCUMENT_BYTES`: the root's and those of its groups and
    arrays (directories holding a ``zarr.json``, followed down from the root); of an ``s3://``
    store, the root's. Returns how many were checked; raises ``StoreError`` naming the first bad
    one."""
    if "://" in url and not url.startswith("file://"):
        import fsspec

        fs, root = fsspec.core.url_to_fs(url)
        path = f"{str(root).rstrip('/')}/{DOCUMENT}"
        if fs.exists(path):
            info = fs.info(path)
            if int(info.get("size") or 0) > MAX_DOCUMENT_BYTES:
                raise _refuse(fs.unstrip_protocol(path), "file", int(info["size"]))
            return 1
        return 0
    n = 0
    seen: set[tuple[int, int]] = set()
    stack = [Path(url.removeprefix("file://"))]
    while stack:
        d = stack.pop()
        doc = d / DOCUMENT
        if not os.path.lexists(doc):
            continue  # not a node (an array's chunks, or nothing)
        check_document(doc)
        n += 1
        st = os.stat(d)
        if (st.st_dev, st.st_ino) in seen:  # a link back up the tree
            continue
        seen.add((st.st_dev, st.st_ino))
        with os.scandir(d) as entries:
            stack.extend(Path(e.path) for e in entries if e.is_dir())
    return n
