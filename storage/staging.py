"""Where a run builds its store and how it is published: the staging store beside the target
(keyed by the run id), the blocks a resumed run finds done there, publishing the completed store
by rename (local) or by copy with the root written last (``s3://``), and removing what dpaudit
wrote (and nothing else)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from auditlib.exceptions import StoreError
from storage import schema as S
from storage.pending_io import settle
from storage.targets import (
    exists,
    fs_path,
    is_complete,
    is_dpaudit_store,
    is_remote,
    not_ours,
    occupant,
)

if TYPE_CHECKING:
    pass


def staging_path(url: str, run_id: str) -> str:
    """Where a run builds its store: beside the target, keyed by the run id — a directory (local)
    or a key prefix (``s3://``). The target is replaced only once the staging store is complete,
    so a failed run (even with ``--overwrite``) leaves the old store as it was."""
    if is_remote(url):
        head, _, name = url.rstrip("/").rpartition("/")
        return f"{head}/.{name}.partial-{run_id}"
    p = Path(url)
    return str(p.with_name(f".{p.name}.partial-{run_id}"))


def stale_stagings(url: str, run_id: str) -> list[Path] | list[str]:
    """Staging copies of *other* runs (other specs) on the same target: directories, or ``s3://``
    prefixes (as URLs). Only dpaudit's own (``is_dpaudit_store``), empty directories and the
    remains of a removed copy (:func:`is_remnant`) are listed: anything else with a staging-like
    name is left alone."""
    if is_remote(url):
        fs, path = fs_path(url)
        head, _, name = path.rstrip("/").rpartition("/")
        keep = staging_path(path, run_id)
        scheme = url.split("://", 1)[0]
        found = (f"{scheme}://{q}" for q in fs.glob(f"{head}/.{name}.partial-*") if q != keep)
        return sorted(q for q in found if occupant(q) == "dpaudit" or is_remnant(q))
    p = Path(url)
    keep = Path(staging_path(url, run_id)).name
    return sorted(
        q
        for q in p.parent.glob(f".{p.name}.partial-*")
        if q.name != keep and (occupant(str(q)) in ("empty", "dpaudit") or is_remnant(str(q)))
    )


#: a chunk's key below its array (zarr's default encoding: ``c`` alone for a 0-d array)
_CHUNK_KEY = re.compile(r"(?:^|/)c(?:/\d+)*$")


def is_remnant(url: str) -> bool:
    """Whether ``url`` is a staging copy's name (``.NAME.partial-RUNID``) holding only what zarr's
    writes leave once the copy itself is gone: chunk files and node documents, and no root
    ``zarr.json``. A write already under way when a failed run removes its staging copy (a task
    Dask cannot interrupt, on a cluster that outlives the run) recreates the directories it writes
    into; what it leaves is no store, holds nothing a run could resume, and would stop every later
    run of the spec. Anything else there (another file, a symbolic link, a special file) makes it
    not a remnant, and it is left alone."""
    name = url.rstrip("/").rpartition("/")[2]
    if not (name.startswith(".") and ".partial-" in name) or exists(url):
        return False
    if is_remote(url):
        fs, path = fs_path(url)
        path = path.rstrip("/")
        fs.invalidate_cache(path)
        keys = [k[len(path) + 1 :] for k in fs.find(path)]
        return bool(keys) and all(_written_by_zarr(k) for k in keys)
    root = Path(url)
    if root.is_symlink() or not root.is_dir():
        return False
    found = False
    for here, dirs, names in os.walk(root):
        for d in dirs:
            if (Path(here) / d).is_symlink():
                return False
        for n in names:
            f = Path(here) / n
            if f.is_symlink() or not f.is_file():
                return False
            if not _written_by_zarr(f.relative_to(root).as_posix()):
                return False
            found = True
    return found


def make_room(url: str) -> bool:
    """Before a run builds (or resumes) its staging copy at ``url``: a removed copy's remains are
    deleted (``True``: say so); nothing, an empty directory or a dpaudit store is left to the run;
    anything else is refused with ``StoreError``, nothing touched."""
    if remove_remnant(url):
        return True
    kind = occupant(url)
    if kind in ("none", "empty", "dpaudit"):
        return False
    what = (
        f"{url!r} holds files that are not a dpaudit store's (no root zarr.json); dpaudit never "
        "deletes them, even with --overwrite"
        if kind == "foreign" and not exists(url)
        else not_ours(url, kind)
    )
    raise StoreError(f"the run's staging copy cannot be built: {what}; move it away and run again")


def _written_by_zarr(key: str) -> bool:
    """A node's document below the root, or a chunk key."""
    return (key.endswith("/zarr.json") and key != "zarr.json") or bool(_CHUNK_KEY.search(key))


def remove_remnant(url: str) -> bool:
    """Delete ``url`` if it is a removed staging copy's remains (:func:`is_remnant`); whether it
    was. The writes that made it end first (``storage/pending_io.py``) when they are this
    process's."""
    settle()
    if not is_remnant(url):
        return False
    if is_remote(url):
        fs, path = fs_path(url)
        fs.rm(path.rstrip("/"), recursive=True)
        fs.invalidate_cache(path)
    else:
        shutil.rmtree(url)
    return True


def prepare_remote(url: str, run_id: str, overwrite: bool) -> None:
    """Before a run on an ``s3://`` target: a completed store stays until the new one is published
    over it (``overwrite`` only); an unfinished store at the target itself (a publish cut short, or
    an older in-place run) is removed with ``overwrite`` and refused otherwise."""
    if not is_remote(url) or not exists(url):
        return
    if is_complete(url):
        if not overwrite:
            raise StoreError(
                f"{url!r} holds a completed store; pass --overwrite to replace it, or choose "
                "another output.store"
            )
        return
    if not overwrite:
        raise StoreError(
            f"{url!r} holds an unfinished store; pass --overwrite to replace it, or choose "
            "another output.store"
        )
    remove(url)


def remove(url: str, run_id: str | None = None) -> None:
    """Delete the dpaudit store at ``url`` (an empty directory too; nothing there: nothing to do).

    Anything else — a file, a symbolic link, a directory or prefix without dpaudit's root metadata
    (``is_dpaudit_store``; ``run_id`` as there) — is refused with ``StoreError``, nothing touched.
    The root ``zarr.json`` goes last, so a deletion cut short still leaves a recognisable store.
    """
    kind = occupant(url, run_id)
    if kind == "none":
        return
    if kind == "empty":
        Path(url).rmdir()
        return
    if kind != "dpaudit":
        raise StoreError(f"refusing to delete {not_ours(url, kind)}: move or remove it yourself")
    _delete_store(url)


def _delete_store(url: str) -> None:
    if is_remote(url):
        fs, path = fs_path(url)
        path = path.rstrip("/")
        root = f"{path}/zarr.json"
        keys = [k for k in fs.find(path) if k != root]
        if keys:
            fs.rm(keys)
        fs.rm_file(root)
        fs.invalidate_cache(path)
        return
    p = Path(url)
    for child in p.iterdir():
        if child.name == "zarr.json":
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    (p / "zarr.json").unlink(missing_ok=True)
    p.rmdir()


def publish(staging: str, url: str) -> None:
    """Move a completed local store from its staging directory to its target (replacing it).

    Only a completed dpaudit store is published, and only over nothing, an empty directory or a
    dpaudit store (checked again here: the target may have changed since the run started).
    ``s3://`` has no rename: the old store is removed only now, every object of the (complete)
    staging store is copied server-side, the root ``zarr.json`` — completion marker and
    consolidated metadata — last, and the staging copy removed. A reader never sees a target that
    claims completion before all of it is there.
    """
    if staging == url:
        return
    if not (is_complete(staging) and is_dpaudit_store(staging)):
        raise StoreError(f"refusing to publish {staging!r}: it is not a completed dpaudit store")
    kind = occupant(url)
    if kind not in ("none", "empty", "dpaudit"):
        raise StoreError(
            f"refusing to replace {not_ours(url, kind)}; the finished run is kept in "
            f"{staging!r}: move it into place yourself"
        )
    if is_remote(url):
        _publish_remote(staging, url)
        return
    target = Path(url)
    target.parent.mkdir(parents=True, exist_ok=True)
    old = target.with_name(f".{target.name}.old")
    remove(str(old))  # a leftover of a publish cut short (only if it is a dpaudit store)
    if kind == "empty":
        target.rmdir()
    elif kind == "dpaudit":
        os.replace(target, old)
    os.replace(staging, target)
    if kind == "dpaudit":
        _delete_store(str(old))


#: the root a target holds while an ``s3://`` store is being published into it
_UNFINISHED_ROOT = json.dumps(
    {"zarr_format": 3, "node_type": "group", "attributes": {S.STORE_ATTR: True}}
).encode()


def _publish_remote(staging: str, url: str) -> None:
    fs, src = fs_path(staging)
    _, dst = fs_path(url)
    dst = dst.rstrip("/")
    # first a root marked as dpaudit's but unfinished (no completion marker, no consolidated
    # metadata), in one write over the old root: a publish cut short at any later point leaves a
    # target that is recognisably an unfinished dpaudit store
    fs.pipe_file(f"{dst}/zarr.json", _UNFINISHED_ROOT)
    fs.invalidate_cache(dst)
    old = [k for k in fs.find(dst) if k != f"{dst}/zarr.json"]
    if old:
        fs.rm(old)
    root = f"{src}/zarr.json"
    keys = [k for k in fs.find(src) if k != root]
    if keys:  # one batched call: fsspec runs the server-side copies concurrently
        fs.copy(keys, [dst + k[len(src) :] for k in keys])
    fs.copy(root, f"{dst}/zarr.json")
    remove(staging)


def discard(staging: str, url: str) -> None:
    """Remove the staging copy after a failed run (never a completed target, never anything that
    is not a dpaudit store: that is left as it is). The reads and writes zarr still runs for an
    interrupted call end first (``storage/pending_io.py``): none writes the copy again, in part,
    once it is removed."""
    settle()
    if staging == url:
        if is_remote(url) and exists(url) and not is_complete(url):
            _discard(url)
    else:
        _discard(staging)


def _discard(url: str) -> None:
    if occupant(url) in ("empty", "dpaudit"):
        remove(url)
    else:
        remove_remnant(url)
