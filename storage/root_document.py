"""The digests of a store's root ``zarr.json``: of the document itself (its attributes: the seed,
the spec, the digests of every node's own document) and of each consolidated copy of a node's
metadata it holds. Recorded in the root attribute ``dpaudit_root_sha256`` once the metadata is
consolidated (the store's last write), over canonical JSON with that record left out: a document
cannot hold the digest of its own bytes, and a change of layout alone (indentation, key order) is
no change. Readers use the consolidated copies; an edited copy or root attribute is what they see,
so ``verify`` (and ``report`` and ``compare`` through it) checks them here."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from storage import files
from storage import schema as S

if TYPE_CHECKING:
    from storage.checksums import Verification

#: the note ``verify`` gives a store finalized before the root document's digests were recorded
NO_ROOT_DIGESTS = (
    f"no digests of the root zarr.json recorded (no {S.ROOT_SHA256_ATTR!r}: a store written by an "
    "older dpaudit): its attributes and the consolidated copies of the metadata were not checked; "
    "run the audit again (with --overwrite) to record them"
)

ROOT = files.DOCUMENT


def _canonical(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def root_digests(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The digests of a root document (parsed): ``root`` over all of it but its consolidated copies
    and :data:`~storage.schema.ROOT_SHA256_ATTR`, ``consolidated`` {node path: digest} over each
    consolidated copy."""
    body = dict(doc)
    attrs = dict(body.get("attributes") or {})
    attrs.pop(S.ROOT_SHA256_ATTR, None)
    body["attributes"] = attrs
    meta = body.get("consolidated_metadata")
    copies: dict[str, Any] = {}
    if isinstance(meta, dict):
        copies = dict(meta.get("metadata") or {})
        body["consolidated_metadata"] = {k: v for k, v in meta.items() if k != "metadata"}
    return {
        "root": _canonical(body),
        "consolidated": {path: _canonical(copy) for path, copy in sorted(copies.items())},
    }


def seal_root(url: str) -> None:
    """Record :func:`root_digests` in the root document of a finalized store: its last write."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    path = f"{str(root).rstrip('/')}/{ROOT}"
    doc = json.loads(files.read_document(path, fs))
    doc.setdefault("attributes", {})[S.ROOT_SHA256_ATTR] = root_digests(doc)
    fs.pipe_file(path, json.dumps(doc, indent=2, ensure_ascii=False).encode())


def verify_root(url: str, storage_options: dict[str, Any] | None, out: Verification) -> None:
    """The root document against its recorded digests: its own part, and each consolidated copy
    (changed, missing or added)."""
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
        doc = json.loads(files.read_document(f"{str(root).rstrip('/')}/{ROOT}", fs))
    except Exception as exc:
        out.problems.append(f"{ROOT}: unreadable ({type(exc).__name__}: {exc})")
        return
    recorded = (doc.get("attributes") or {}).get(S.ROOT_SHA256_ATTR)
    if recorded is None:
        out.notes.append(NO_ROOT_DIGESTS)
        return
    out.metadata += 1
    got = root_digests(doc)
    if not isinstance(recorded, dict) or not isinstance(recorded.get("consolidated"), dict):
        out.problems.append(f"{ROOT}: its digest record {S.ROOT_SHA256_ATTR!r} is malformed")
        return
    if got["root"] != recorded.get("root"):
        out.problems.append(
            f"{ROOT}: metadata checksum mismatch (the root document: its attributes corrupt or "
            "changed)"
        )
    want, have = recorded["consolidated"], got["consolidated"]
    for node in sorted(set(want) | set(have)):
        where = f"{ROOT}: consolidated copy of {node}/{ROOT}"
        if node not in have:
            out.problems.append(f"{where}: missing (its digest is recorded)")
        elif node not in want:
            out.problems.append(f"{where}: no digest recorded (added after the run)")
        else:
            out.metadata += 1
            if have[node] != want[node]:
                out.problems.append(f"{where}: metadata checksum mismatch (corrupt or changed)")
