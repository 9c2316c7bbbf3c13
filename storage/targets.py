"""What is at a result store's URL: local path or ``s3://`` key prefix, absent, empty, a dpaudit
store (complete or not) or something else; the check before a run writes there (refuse to replace
what dpaudit did not write, or a store without ``--overwrite``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zarr
import zarr.errors

from auditlib.exceptions import StoreError
from storage import files
from storage import schema as S

if TYPE_CHECKING:
    pass


def is_remote(url: str) -> bool:
    return "://" in str(url) and not str(url).startswith("file://")


def absolute(url: str) -> str:
    """A local path made absolute (remote URLs unchanged): every worker must resolve it alike."""
    return url if is_remote(url) else str(Path(url).resolve())


def fs_path(url: str) -> tuple[Any, str]:
    """The fsspec filesystem and path of a URL; options (endpoint, credentials) come from the
    environment or fsspec's configuration (e.g. ``FSSPEC_S3_ENDPOINT_URL``), never from dpaudit."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    return fs, str(path)


def exists(url: str) -> bool:
    """Whether a Zarr hierarchy (its root ``zarr.json``) exists at ``url``."""
    if not is_remote(url):
        return (Path(url) / "zarr.json").exists()
    fs, path = fs_path(url)
    return bool(fs.exists(f"{path}/zarr.json"))


def _root_meta(url: str) -> dict[str, Any] | None:
    """The root ``zarr.json`` of ``url`` as JSON; ``None`` if absent, unreadable or not an object
    (``StoreError`` if it is no regular file or too large to read: :func:`storage.files.read_document`)."""
    try:
        if is_remote(url):
            fs, path = fs_path(url)
            raw = files.read_document(f"{path}/zarr.json", fs)
        else:
            raw = files.read_document(str(Path(url) / "zarr.json"))
        meta = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None


def is_complete(url: str) -> bool:
    """A completed store: root marker set *and* consolidated metadata written (both last)."""
    return completed_attrs(url) is not None


def completed_attrs(url: str) -> dict[str, Any] | None:
    """The root attributes of a completed store (:func:`is_complete`), read once; ``None`` for
    anything else."""
    meta = _root_meta(url)
    if meta is None:
        return None
    attrs = meta.get("attributes") or {}
    if not isinstance(attrs, dict) or not attrs.get(S.COMPLETE_ATTR):
        return None
    return attrs if meta.get("consolidated_metadata") else None


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


def occupant(url: str, run_id: str | None = None) -> str:
    """What is at ``url``: ``none``, ``empty`` (an empty directory), ``dpaudit`` (a store dpaudit
    created), ``symlink``, ``file``, a special file (:func:`storage.files.kind`: a FIFO, a device,
    a socket), or ``foreign`` (anything else)."""
    if is_remote(url):
        fs, path = fs_path(url)
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


def not_ours(url: str, kind: str) -> str:
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
            fs, path = fs_path(url)
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
    kind = occupant(url)
    if kind in ("none", "empty"):
        return
    if kind != "dpaudit":
        raise StoreError(
            f"output store {not_ours(shown, kind)}: choose another output.store, or move it "
            "away yourself"
        )
    if not overwrite and (not is_remote(url) or is_complete(url)):
        # (an unfinished s3:// store at the target itself is refused or resumed by prepare_remote)
        raise StoreError(
            f"output store {shown!r} already exists; pass --overwrite (or output.overwrite = true) "
            "to replace it, or choose another output.store"
        )


def root_attrs(url: str) -> dict[str, Any]:
    check_root(url)
    return dict(zarr.open_group(url, mode="r", zarr_format=3).attrs)


def check_root(url: str) -> None:
    """The root ``zarr.json`` of a local store, checked before zarr reads it (the consolidated
    metadata in it is all a reader of a completed store reads): a regular file of bounded size."""
    if not is_remote(url):
        root = Path(url) / files.DOCUMENT
        if os.path.lexists(root):
            files.check_document(root)


def group_attrs(url: str, group: str) -> dict[str, Any]:
    """A group's attributes (of a store being built: no consolidated metadata needed)."""
    return dict(zarr.open_group(url, mode="r", zarr_format=3, path=group).attrs)
