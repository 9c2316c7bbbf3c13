"""The lock a run holds on its target store for the whole run: ``flock`` on ``.<store>.lock``
beside a local target, a conditionally created lock object for ``s3://``, taken over from a
killed holder."""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditlib.exceptions import StoreError
from storage.targets import fs_path, is_remote

if TYPE_CHECKING:
    pass


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
    fs, path = fs_path(url)
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
