"""What a local path is, in the words of an error message: dpaudit writes only regular files and its
own store directories, and never opens a FIFO, a device or a socket where it expects either."""

from __future__ import annotations

import os
import stat
from pathlib import Path

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
