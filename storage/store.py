"""Open, template and write result stores (Zarr v3 through xarray).

Writes are safe by construction: the template is written once (metadata only), each worker writes
exactly one chunk-aligned (state, geolevel) region, and small groups are written whole by one writer.
A local store is built in a staging directory beside its target and moved into place only when the run
has completed, so a failed or interrupted run never leaves a half-written store at the target. An
``s3://`` store (no rename) is staged under a prefix beside its target and published by copying, the
root metadata with the completion marker and the consolidated metadata last. Every block records its
checksums after its data (``storage/checksums.py``): they are both its integrity record and the
marker a resumed run uses to skip it.

dpaudit deletes only what it created: every root it writes carries ``dpaudit_store`` from its first
write (``is_dpaudit_store``), and ``remove``, ``discard``, ``publish`` and ``stale_stagings`` touch
nothing else (an empty directory aside). See docs/guarantees.md.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np
import xarray as xr
import zarr
import zarr.errors

from auditlib.exceptions import StoreError
from storage import checksums, files, root_document
from storage import schema as S
from storage.residuals import (
    LAYOUT,
    LAYOUT_ATTR,
    REPLICATE_CHUNK_ATTR,
    REPLICATE_SHA256,
    item_layout,
    layout_of,
    replicate_ranges,
    spans,
    split_digest,
)

if TYPE_CHECKING:
    from auditlib.simulate import ResidualBlock


def is_remote(url: str) -> bool:
    return "://" in str(url) and not str(url).startswith("file://")


def absolute(url: str) -> str:
    """A local path made absolute (remote URLs unchanged): every worker must resolve it alike."""
    return url if is_remote(url) else str(Path(url).resolve())


def _fs(url: str) -> tuple[Any, str]:
    """The fsspec filesystem and path of a URL; options (endpoint, credentials) come from the
    environment or fsspec's configuration (e.g. ``FSSPEC_S3_ENDPOINT_URL``), never from dpaudit."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    return fs, str(path)


def exists(url: str) -> bool:
    """Whether a Zarr hierarchy (its root ``zarr.json``) exists at ``url``."""
    if not is_remote(url):
        return (Path(url) / "zarr.json").exists()
    fs, path = _fs(url)
    return bool(fs.exists(f"{path}/zarr.json"))


def _root_meta(url: str) -> dict[str, Any] | None:
    """The root ``zarr.json`` of ``url`` as JSON; ``None`` if absent, unreadable or not an object
    (``StoreError`` if it is no regular file or too large to read: :func:`storage.files.read_document`)."""
    try:
        if is_remote(url):
            fs, path = _fs(url)
            raw = files.read_document(f"{path}/zarr.json", fs)
        else:
            raw = files.read_document(str(Path(url) / "zarr.json"))
        meta = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None


def is_complete(url: str) -> bool:
    """A completed store: root marker set *and* consolidated metadata written (both last)."""
    meta = _root_meta(url)
    if meta is None:
        return False
    attrs = meta.get("attributes") or {}
    return bool(attrs.get(S.COMPLETE_ATTR)) and bool(meta.get("consolidated_metadata"))


def is_dpaudit_store(url: str, run_id: str | None = None) -> bool:
    """Whether ``url`` holds a hierarchy dpaudit created: finished, unfinished or a staging copy.

    Its root ``zarr.json`` is a group whose attributes carry ``dpaudit_store`` (written with the
    root itself), or — stores written before that mark — the completion marker or
    ``dpaudit_version``, or a ``run_id`` equal to ``run_id`` or to the id in a staging name
    (``.<store>.partial-<run id>``). Nothing else is ever replaced or deleted by dpaudit.
    """
    meta = _root_meta(url)
    if meta is None or meta.get("node_type") != "group":
        return False
    attrs = meta.get("attributes")
    if not isinstance(attrs, dict):
        return False
    if attrs.get(S.STORE_ATTR) is True or attrs.get(S.COMPLETE_ATTR) is True:
        return True
    if S.LEGACY_VERSION_ATTR in attrs:
        return True
    name = str(url).rstrip("/").rpartition("/")[2]
    _, sep, staged_id = name.partition(".partial-")
    held = attrs.get("run_id")
    if not isinstance(held, str) or not held:
        return False
    return held == run_id or (name.startswith(".") and bool(sep) and held == staged_id)


def _occupant(url: str, run_id: str | None = None) -> str:
    """What is at ``url``: ``none``, ``empty`` (an empty directory), ``dpaudit`` (a store dpaudit
    created), ``symlink``, ``file``, a special file (:func:`storage.files.kind`: a FIFO, a device,
    a socket), or ``foreign`` (anything else)."""
    if is_remote(url):
        fs, path = _fs(url)
        path = path.rstrip("/")
        if fs.isfile(path):
            return "file"
        fs.invalidate_cache(path)
        if not fs.find(path):
            return "none"
    else:
        p = Path(url)
        if p.is_symlink():
            return "symlink"
        found = files.kind(p)
        if found == "none":
            return "none"
        if found != "directory":
            return "file" if found == "file" else found
        if next(p.iterdir(), None) is None:
            return "empty"
    return "dpaudit" if is_dpaudit_store(url, run_id) else "foreign"


def _not_ours(url: str, kind: str) -> str:
    what = {
        "symlink": "is a symbolic link",
        "file": "is a file",
        "foreign": f"is not a dpaudit store (its root zarr.json has no {S.STORE_ATTR!r} attribute)",
    }.get(kind, f"is a {kind}, not a directory")
    return f"{url!r} {what}; dpaudit never replaces or deletes it, even with --overwrite"


def check_target(url: str, overwrite: bool) -> None:
    """Refuse (before anything is written) to replace an existing store unless asked to, and to
    replace anything that is not a dpaudit store at all (``--overwrite`` or not).

    Nothing there, or an empty directory: the run may write there. A dpaudit store (finished or
    not): only with ``overwrite``. A file, a symbolic link, or a directory or ``s3://`` prefix
    holding anything else: refused, nothing touched.
    """
    if is_remote(url):
        try:
            fs, path = _fs(url)
            fs.exists(path)  # reachable, with working credentials
        except ImportError as exc:
            raise StoreError(
                f"cannot open {url!r}: {exc}; install the s3 extra (pip install 'dpaudit[s3]')"
            ) from exc
        except Exception as exc:
            raise StoreError(
                f"cannot reach {url!r}: {type(exc).__name__}: {exc}; check the endpoint "
                "(FSSPEC_S3_ENDPOINT_URL or fsspec config), the bucket and the credentials "
                "(AWS_* environment variables or profile)"
            ) from exc
        shown = url
    else:
        shown = str(Path(url))
    kind = _occupant(url)
    if kind in ("none", "empty"):
        return
    if kind != "dpaudit":
        raise StoreError(
            f"output store {_not_ours(shown, kind)}: choose another output.store, or move it "
            "away yourself"
        )
    if not overwrite and (not is_remote(url) or is_complete(url)):
        # (an unfinished s3:// store at the target itself is refused or resumed by prepare_remote)
        raise StoreError(
            f"output store {shown!r} already exists; pass --overwrite (or output.overwrite = true) "
            "to replace it, or choose another output.store"
        )


def lock_path(url: str) -> Path:
    p = Path(url)
    return p.with_name(f".{p.name}.lock")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _identity() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started_utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }


@contextmanager
def exclusive(url: str) -> Iterator[None]:
    """Hold the target's lock for the whole run: a second run on the same store is refused.

    Local paths: an exclusive ``flock`` on ``.<store>.lock`` beside the target, held through an
    open file for the whole run; the OS releases it when the process ends, however it ends, so a
    lock left by a killed run is free again (no stale lock exists). The holder's pid, host and start
    time are written into the file for the refusal message only. ``s3://``: a lock object
    ``<store>.lock`` created with a conditional write (``If-None-Match: *``), so of two runs
    starting at once exactly one gets it; a lock left by a killed run is taken over (a conditional
    write, ``If-Match`` its ETag) only from the same host once its PID is gone, otherwise the
    message names it for removal by hand; released by a delete conditional on our ETag.
    """
    if is_remote(url):
        with _remote_lock(url):
            yield
        return
    lock = lock_path(url)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = _flock(lock, url)
    try:
        yield
    finally:
        # unlinked while still held: whoever locks the old file afterwards sees that the path no
        # longer names it and starts again on the path's (new) file
        try:
            lock.unlink(missing_ok=True)
        finally:
            os.close(fd)


def _flock(lock: Path, url: str) -> int:
    """An open descriptor of ``lock`` holding its exclusive flock, with this process's identity."""
    for _ in range(100):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, since = _read_identity(fd)
            os.close(fd)
            raise StoreError(
                f"another dpaudit run (pid {pid}) is writing {url!r}{since}; wait for it to finish"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise StoreError(
                f"cannot lock {str(lock)!r}: {exc}; the file system must support flock (on NFS "
                "that depends on the server), or choose a store on a local disk"
            ) from exc
        try:
            same = os.path.samestat(os.stat(lock), os.fstat(fd))
        except FileNotFoundError:
            same = False
        if not same:  # its holder released it (and unlinked the path) before we locked it
            os.close(fd)
            continue
        os.ftruncate(fd, 0)  # a killed holder's identity (the offset is still 0)
        os.write(fd, json.dumps(_identity()).encode())
        return fd
    raise StoreError(f"could not lock {url!r}; other runs keep starting on it")  # pragma: no cover


def _read_identity(fd: int) -> tuple[str, str]:
    """(pid, " (host H, since T)") of a lock's holder, as far as it has written them."""
    try:
        held = json.loads(os.pread(fd, 4096, 0))
        return str(int(held["pid"])), f" (host {held['host']}, since {held['started_utc']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "not yet recorded", ""


@contextmanager
def _remote_lock(url: str) -> Iterator[None]:
    fs, path = _fs(url)
    lock = f"{path.rstrip('/')}.lock"
    me = _identity()
    body = json.dumps(me).encode()
    try:
        out = fs.pipe_file(lock, body, mode="create")
    except (FileExistsError, OSError) as exc:
        fs.invalidate_cache(lock)
        if not fs.exists(lock):
            raise StoreError(f"could not lock {url!r}: {type(exc).__name__}: {exc}") from exc
        out = _take_over(fs, lock, body, url, me)
    etag = (out or {}).get("ETag")
    try:
        yield
    finally:
        _release_remote(fs, lock, etag)


def _take_over(fs: Any, lock: str, body: bytes, url: str, me: dict[str, Any]) -> Any:
    """Replace a lock object left by a killed run on this host — in one conditional write
    (``If-Match`` its ETag), so of two runs taking it over at once exactly one succeeds."""
    held: dict[str, Any] = {}
    try:
        before = fs.info(lock)["ETag"]
        try:
            held = json.loads(fs.cat_file(lock))
        except ValueError:
            held = {}
        fs.invalidate_cache(lock)
        after = fs.info(lock)["ETag"]
    except FileNotFoundError:  # released meanwhile: a run is starting or just finished
        before, after = None, ""
    if not isinstance(held, dict):
        held = {}
    pid = int(held.get("pid", 0) or 0)
    stale = held.get("host") == me["host"] and pid > 0 and pid != me["pid"] and not _pid_alive(pid)
    refusal = StoreError(
        f"another dpaudit run (host {held.get('host', '?')}, pid {pid}) is writing {url!r}; wait "
        f"for it to finish, or delete the lock object {fs.unstrip_protocol(lock)!r} if that run "
        "is gone"
    )
    if before != after or not stale:
        raise refusal
    try:
        return fs.pipe_file(lock, body, IfMatch=before)  # stale: its writer on this host is gone
    except (FileExistsError, OSError):  # someone else replaced it first
        raise refusal from None


def _release_remote(fs: Any, lock: str, etag: str | None) -> None:
    """Delete the lock object if it is still ours (``If-Match`` our ETag)."""
    bucket, key, _ = fs.split_path(lock)
    fs.invalidate_cache(lock)
    if etag:
        try:
            fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=etag)
            return
        except Exception:  # not ours, or a server without conditional deletes
            try:
                if fs.info(lock)["ETag"] != etag:
                    return
            except FileNotFoundError:
                return
    fs.rm_file(lock)


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
    prefixes (as URLs). Only dpaudit's own (``is_dpaudit_store``) or empty directories are listed:
    anything else with a staging-like name is left alone."""
    if is_remote(url):
        fs, path = _fs(url)
        head, _, name = path.rstrip("/").rpartition("/")
        keep = staging_path(path, run_id)
        scheme = url.split("://", 1)[0]
        found = (f"{scheme}://{q}" for q in fs.glob(f"{head}/.{name}.partial-*") if q != keep)
        return sorted(q for q in found if _occupant(q) == "dpaudit")
    p = Path(url)
    keep = Path(staging_path(url, run_id)).name
    return sorted(
        q
        for q in p.parent.glob(f".{p.name}.partial-*")
        if q.name != keep and _occupant(str(q)) in ("empty", "dpaudit")
    )


def resume_point(url: str, run_id: str) -> set[tuple[int, int]] | None:
    """The finished (state, geolevel) blocks of an interrupted run of the same spec at ``url``.

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
    kind = _occupant(url, run_id)
    if kind == "none":
        return
    if kind == "empty":
        Path(url).rmdir()
        return
    if kind != "dpaudit":
        raise StoreError(f"refusing to delete {_not_ours(url, kind)}: move or remove it yourself")
    _delete_store(url)


def _delete_store(url: str) -> None:
    if is_remote(url):
        fs, path = _fs(url)
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
    kind = _occupant(url)
    if kind not in ("none", "empty", "dpaudit"):
        raise StoreError(
            f"refusing to replace {_not_ours(url, kind)}; the finished run is kept in "
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
    fs, src = _fs(staging)
    _, dst = _fs(url)
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
    is not a dpaudit store: that is left as it is)."""
    if staging == url:
        if is_remote(url) and exists(url) and not is_complete(url):
            _discard(url)
    else:
        _discard(staging)


def _discard(url: str) -> None:
    if _occupant(url) in ("empty", "dpaudit"):
        remove(url)


def _to_zarr(ds: xr.Dataset, url: str, **kw: Any) -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module="zarr")
        warnings.filterwarnings("ignore", message=".*Consolidated metadata.*")
        return ds.to_zarr(url, zarr_format=3, consolidated=False, **kw)


def _str_coord(values: Sequence[str]) -> np.ndarray:
    return np.array(list(values), dtype=object)


def create_residual_template(
    url: str,
    *,
    states: Sequence[str],
    geolevels: Sequence[str],
    replicates: int,
    n_items: int | np.ndarray,
    queries: Sequence[str],
    sigma2: np.ndarray,
    attrs: Mapping[str, Any],
    replicate_chunk: int | None = None,
) -> None:
    """Write the root attributes and the metadata of the residual arrays (no block data).

    ``replicate_chunk``: replicates per chunk of ``residual`` (default: all of them), the ranges
    separate tasks may write (:func:`write_residual_block`'s ``replicates``).

    ``n_items``: the items each (state, geolevel) block may hold, an array (state, geolevel) (0: a
    region without data) or one number for every region. The blocks lie one after the other on a
    flat item axis, each at its own length rounded up to whole chunks (``storage/residuals.py``);
    their offsets and capacities are written now.
    """
    s, g, r = len(states), len(geolevels), replicates
    planned = np.broadcast_to(np.asarray(n_items, dtype=np.int64), (s, g))
    lay = item_layout(planned, r)
    n, c = max(lay.n_items, 1), lay.chunk
    rc = r if not replicate_chunk else max(1, min(int(replicate_chunk), r))
    nv = len(S.RESIDUAL_BLOCK_VARS)
    try:  # the attributes (dpaudit's mark first of all) in the same write as the root itself
        zarr.open_group(
            url, mode="w-", zarr_format=3, attributes={**dict(attrs), S.STORE_ATTR: True}
        )
    except (FileExistsError, zarr.errors.ContainsGroupError, zarr.errors.ContainsArrayError) as exc:
        raise StoreError(f"store {url!r} already exists; a template is only written once") from exc
    coords = {
        S.STATE: _str_coord(states),
        S.GEOLEVEL: _str_coord(geolevels),
        S.REPLICATE: np.arange(r),
        S.QUERY: _str_coord(queries),
    }
    item = (S.ITEM,)
    ds = xr.Dataset(
        {
            "residual": (
                (S.REPLICATE, S.ITEM),
                da.full((r, n), np.nan, dtype=np.float32, chunks=(rc, c)),
                {"long_name": "DP count - true count", "units": "persons"},
            ),
            "truth": (item, da.zeros(n, dtype=np.int32, chunks=c)),
            "query_index": (
                item,
                da.full(n, -1, dtype=np.int16, chunks=c),
                {"description": "index into the query coordinate; -1 = padding"},
            ),
            "unit_index": (item, da.zeros(n, dtype=np.int32, chunks=c)),
            "cell_index": (item, da.zeros(n, dtype=np.int32, chunks=c)),
            "n_items": ((S.STATE, S.GEOLEVEL), da.zeros((s, g), dtype=np.int64, chunks=(1, 1))),
            S.BLOCK_SHA256: (
                (S.STATE, S.GEOLEVEL, S.BLOCK_VAR, S.BYTE),
                da.zeros((s, g, nv, 32), dtype=np.uint8, chunks=(1, 1, nv, 32)),
                {
                    "description": "sha256 of each block variable, written after the block; "
                    "all zero: block not written"
                },
            ),
            REPLICATE_SHA256: (
                (S.STATE, S.GEOLEVEL, S.REPLICATE, S.BYTE),
                da.zeros((s, g, r, 32), dtype=np.uint8, chunks=(1, 1, rc, 32)),
                {
                    "description": "sha256 of each replicate's row of a block, written after its "
                    "replicate range; all zero: not written"
                },
            ),
            "sigma2": ((S.GEOLEVEL, S.QUERY), np.asarray(sigma2, dtype=np.float64)),
            "item_offset": (
                (S.STATE, S.GEOLEVEL),
                lay.offset,
                {"description": "first item of the (state, geolevel) block"},
            ),
            "item_capacity": (
                (S.STATE, S.GEOLEVEL),
                lay.capacity,
                {"description": "items the block may hold; it spans them rounded up to chunks"},
            ),
        },
        coords={**coords, S.BLOCK_VAR: _str_coord(S.RESIDUAL_BLOCK_VARS)},
        attrs={LAYOUT_ATTR: LAYOUT, REPLICATE_CHUNK_ATTR: rc},
    )
    small = ("sigma2", "item_offset", "item_capacity")
    encoding = {
        "residual": {"chunks": (rc, c)},
        # integers carry no fill value, so xarray never masks them (0 and -1 are data)
        **{
            v: {"chunks": (c,), "_FillValue": None}
            for v in ("truth", "query_index", "unit_index", "cell_index")
        },
        "n_items": {"chunks": (1, 1), "_FillValue": None},
        S.BLOCK_SHA256: {"chunks": (1, 1, nv, 32), "_FillValue": None},
        REPLICATE_SHA256: {"chunks": (1, 1, rc, 32), "_FillValue": None},
        **{v: {"_FillValue": None} for v in small[1:]},
    }
    _to_zarr(ds, url, group=S.RESIDUALS, mode="w", compute=False, encoding=encoding)
    # the small numpy-backed tables (sigma2, the blocks' places): written now
    _to_zarr(ds[list(small)], url, group=S.RESIDUALS, mode="a")
    group = zarr.open_group(url, mode="r+", zarr_format=3, path=S.RESIDUALS)
    group.attrs[S.TEMPLATE_COMPLETE_ATTR] = True  # last: a resumed run may write into it


def _array(url: str, name: str, mode: str = "r") -> zarr.Array:
    arr = zarr.open_group(url, mode=mode, zarr_format=3, path=S.RESIDUALS)[name]  # type: ignore[arg-type]
    if not isinstance(arr, zarr.Array):
        raise StoreError(f"{S.RESIDUALS}/{name} in {url!r} is not an array")
    return arr


def block_place(url: str, state: int, geolevel: int) -> tuple[int, int, int]:
    """(first item, planned items, items of its whole chunks) of a block on the item axis."""
    grp = zarr.open_group(url, mode="r", zarr_format=3, path=S.RESIDUALS)
    if "item_offset" not in grp:
        raise StoreError(
            f"store {url!r} has the padded residual layout 1 of an older dpaudit; this dpaudit "
            f"writes layout {LAYOUT}: re-run the audit with --overwrite to rebuild it"
        )
    off, cap, truth = (_array(url, name) for name in ("item_offset", "item_capacity", "truth"))
    shape = off.shape
    if not (0 <= state < shape[0] and 0 <= geolevel < shape[1]):
        raise StoreError(
            f"region (state={state}, geolevel={geolevel}) is outside the store {shape}"
        )
    n = int(np.asarray(cap[state, geolevel]))
    return int(np.asarray(off[state, geolevel])), n, int(spans(n, int(truth.chunks[0])))


def replicate_chunk(url: str) -> int:
    """Replicates per chunk of a store's ``residual``: the ranges its writers may take."""
    return int(_array(url, "residual").chunks[0])


def write_residual_block(
    url: str,
    state: int,
    geolevel: int,
    block: ResidualBlock | None,
    *,
    replicates: tuple[int, int] | None = None,
) -> int:
    """Write one (state, geolevel) block, or the replicate range ``replicates`` = (start, stop) of
    it (whole chunks of the replicate axis: a multiple of the store's replicate chunk, or up to the
    last replicate): its rows of the whole chunks of its place on the item axis (its items, then NaN
    padding to the end of its last chunk), then each replicate's digest (the range's completion
    marker). The first range also writes the block's item variables (−1 / 0 padding) and
    ``n_items`` before its digests. The block's checksums follow once every replicate of the
    block is written (:func:`seal_block`)."""
    off, cap, span = block_place(url, state, geolevel)
    arr = _array(url, "residual")
    r, rc = arr.shape[0], int(arr.chunks[0])
    r0, r1 = (0, r) if replicates is None else (int(replicates[0]), int(replicates[1]))
    if not (0 <= r0 < r1 <= r) or r0 % rc or (r1 % rc and r1 != r):
        raise StoreError(
            f"replicates [{r0}, {r1}) of block ({state}, {geolevel}) are not whole chunks of the "
            f"store's {r} replicates (chunks of {rc}); write ranges of {rc} replicates"
        )
    n = 0 if block is None else block.n_items
    if n > cap:
        raise StoreError(f"block ({state}, {geolevel}) has {n} items; the store holds {cap} for it")
    res = np.full((r1 - r0, span), np.nan, np.float32)
    items = _item_values(span, block)
    if block is not None:
        if block.residual.shape[0] != r1 - r0:
            raise StoreError(
                f"block has {block.residual.shape[0]} replicates; the range [{r0}, {r1}) {r1 - r0}"
            )
        res[:, :n] = block.residual
    if span:
        _array(url, "residual", mode="r+")[r0:r1, off : off + span] = res
    if r0 == 0:  # one writer of the block's items: the task of its first range
        if span:
            for name in ("truth", "query_index", "unit_index", "cell_index"):
                _array(url, name, mode="r+")[off : off + span] = items[name]
        _array(url, "n_items", mode="r+")[state : state + 1, geolevel : geolevel + 1] = items[
            "n_items"
        ]
    # each replicate's digest after its data: the range's completion marker
    rows = np.stack([np.frombuffer(checksums.digest(row), np.uint8) for row in res])
    _array(url, REPLICATE_SHA256, mode="r+")[state, geolevel, r0:r1] = rows
    seal_block(url, state, geolevel, items)
    return n


def _item_values(span: int, block: ResidualBlock | None) -> dict[str, np.ndarray]:
    """The item variables of a block's place (its items, then −1 / 0 padding) and ``n_items``."""
    n = 0 if block is None else block.n_items
    out: dict[str, np.ndarray] = {
        "truth": np.zeros(span, np.int32),
        "query_index": np.full(span, -1, np.int16),
        "unit_index": np.zeros(span, np.int32),
        "cell_index": np.zeros(span, np.int32),
        "n_items": np.array([[n]], np.int64),
    }
    if block is not None:
        out["truth"][:n] = block.truth
        out["query_index"][:n] = block.query_index
        out["unit_index"][:n] = block.unit_index
        out["cell_index"][:n] = block.cell_index
    return out


def seal_block(
    url: str, state: int, geolevel: int, items: Mapping[str, np.ndarray] | None = None
) -> bool:
    """Write a block's checksums (its completion marker) if every replicate of it is written;
    return whether it is sealed. ``items``: its item variables and ``n_items`` as written (else
    read back). Two tasks finishing a block's last ranges together both write the same bytes."""
    reps = np.asarray(_array(url, REPLICATE_SHA256)[state, geolevel])
    if not reps.any(axis=-1).all():
        return False
    if items is None:
        off, _, span = block_place(url, state, geolevel)
        items = {
            name: np.asarray(_array(url, name)[off : off + span])
            for name in ("truth", "query_index", "unit_index", "cell_index")
        }
        items["n_items"] = np.asarray(
            _array(url, "n_items")[state : state + 1, geolevel : geolevel + 1]
        )
    digests = np.stack(
        [
            np.frombuffer(split_digest(reps), np.uint8)
            if name == "residual"
            else np.frombuffer(checksums.digest(items[name]), np.uint8)
            for name in S.RESIDUAL_BLOCK_VARS
        ]
    )
    _array(url, S.BLOCK_SHA256, mode="r+")[state, geolevel] = digests
    return True


def done_blocks(url: str) -> set[tuple[int, int]]:
    """(state, geolevel) indices of the blocks whose writes completed (their checksums are set)."""
    marks = np.asarray(_array(url, S.BLOCK_SHA256)[...]).reshape(
        *_array(url, S.BLOCK_SHA256).shape[:2], -1
    )
    s, g = np.nonzero(marks.any(axis=-1))
    return {(int(a), int(b)) for a, b in zip(s, g, strict=True)}


def done_ranges(url: str) -> set[tuple[int, int, int]]:
    """(state, geolevel, first replicate) of every replicate range whose writes completed (every
    replicate's digest set), in a layout-3 store."""
    arr = _array(url, REPLICATE_SHA256)
    written = np.asarray(np.asarray(arr[...]).any(axis=-1))  # (state, geolevel, replicate)
    out: set[tuple[int, int, int]] = set()
    for r0, r1 in replicate_ranges(arr.shape[2], int(arr.chunks[2])):
        s, g = np.nonzero(written[:, :, r0:r1].all(axis=-1))
        out |= {(int(a), int(b), r0) for a, b in zip(s, g, strict=True)}
    return out


def pending_blocks(url: str) -> set[tuple[int, int]]:
    """The blocks whose every replicate range is written but whose checksums are not (a run
    killed between its last range and the seal): done once sealed (:func:`seal_pending`)."""
    arr = _array(url, REPLICATE_SHA256)
    written = np.asarray(arr[...]).any(axis=-1).all(axis=-1)
    pending = {(int(a), int(b)) for a, b in zip(*np.nonzero(written), strict=True)}
    return pending - done_blocks(url)


def seal_pending(url: str) -> set[tuple[int, int]]:
    """Seal the :func:`pending_blocks`; return them."""
    pending = pending_blocks(url)
    for s, g in sorted(pending):
        seal_block(url, s, g)
    return pending


def _items(url: str, state: int, geolevel: int) -> slice:
    off, _, _ = block_place(url, state, geolevel)
    n = int(np.asarray(_array(url, "n_items")[state, geolevel]))
    return slice(off, off + n)


def read_residuals(url: str, state: int, geolevel: int) -> tuple[np.ndarray, np.ndarray]:
    """(residual (replicates, n), query_index (n,)) of one block, its own items only."""
    items = _items(url, state, geolevel)
    res = np.asarray(_array(url, "residual")[:, items])
    qi = np.asarray(_array(url, "query_index")[items])
    return res, qi


def read_cells(url: str, state: int, geolevel: int) -> np.ndarray:
    """cell_index (n,) of one block's items (the cell of its query each item counts)."""
    return np.asarray(_array(url, "cell_index")[_items(url, state, geolevel)])


def read_items(url: str, state: int, geolevel: int) -> tuple[np.ndarray, np.ndarray]:
    """(truth (n,), unit_index (n,)) of one block's items."""
    items = _items(url, state, geolevel)
    truth = np.asarray(_array(url, "truth")[items])
    return truth, np.asarray(_array(url, "unit_index")[items])


def write_group(url: str, group: str, ds: xr.Dataset) -> None:
    """Write a small group whole (one writer)."""
    ds = ds.copy()
    for name, var in ds.variables.items():
        if var.dtype.kind == "U":
            ds[name] = var.astype(object)
    _to_zarr(ds, url, group=group, mode="w")
    record_checksums(url, group)


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
    _check_root(url)
    kw.setdefault("chunks", None)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning)
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        return xr.open_zarr(url, group=group, consolidated=True, **kw)


def groups(url: str) -> list[str]:
    """Names of the groups a store holds."""
    _check_root(url)
    return sorted(name for name, _ in zarr.open_group(url, mode="r", zarr_format=3).groups())


def root_attrs(url: str) -> dict[str, Any]:
    _check_root(url)
    return dict(zarr.open_group(url, mode="r", zarr_format=3).attrs)


def _check_root(url: str) -> None:
    """The root ``zarr.json`` of a local store, checked before zarr reads it (the consolidated
    metadata in it is all a reader of a completed store reads): a regular file of bounded size."""
    if not is_remote(url):
        root = Path(url) / files.DOCUMENT
        if os.path.lexists(root):
            files.check_document(root)


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
        raise StoreError(f"refusing to drop {group!r}: {_not_ours(url, 'foreign')}")
    fs, path = _fs(f"{str(url).rstrip('/')}/{group}")
    if fs.exists(path):
        fs.rm(path, recursive=True)


def group_attrs(url: str, group: str) -> dict[str, Any]:
    """A group's attributes (of a store being built: no consolidated metadata needed)."""
    return dict(zarr.open_group(url, mode="r", zarr_format=3, path=group).attrs)
