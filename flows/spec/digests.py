"""What a run id hashes of the files a spec names: their content, never where they are.

An allocation file, a table (``population.path``), the published runs' files
(``release.published_files``) and an areas file (``release.areas``) set the numbers by their
bytes: editing one must give a new run id (a resumed run would otherwise mix results of two
versions of the file), and the same bytes at another path (the spec moved, a copy in another
checkout) the same one.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from auditlib.allocations import allocation_digest, allocation_label


def file_sha256(path: str) -> str:
    """SHA-256 of the file's bytes, read in blocks (a table may be large)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _content(path: str) -> str:
    """``sha256:<hex>`` of an existing file; the text itself otherwise (a spec's checks refuse a
    missing file before any run id is needed)."""
    return f"sha256:{file_sha256(path)}" if path and Path(path).is_file() else path


def content_addressed(data: dict[str, Any]) -> dict[str, Any]:
    """A spec's ``model_dump(mode="json")`` with every file path it names replaced by the digest of
    the file's bytes (in place; returned). A shipped allocation id stays as it is."""
    audit = data.get("audit", {})
    allocation = audit.get("allocation")
    if isinstance(allocation, str) and (digest := allocation_digest(allocation)) is not None:
        audit["allocation"] = f"sha256:{digest}"
    population = data.get("population", {})
    if isinstance(population.get("path"), str) and population["path"]:
        population["path"] = _content(population["path"])
    release = data.get("release", {})
    if isinstance(release.get("published_files"), list):
        release["published_files"] = [_content(str(f)) for f in release["published_files"]]
    if isinstance(release.get("areas"), str) and release["areas"]:
        release["areas"] = _content(release["areas"])  # a published release's areas file
    return data


def path_free(data: dict[str, Any]) -> dict[str, Any]:
    """A spec's data as a store records it: an allocation file named by its file name and content
    digest (:func:`auditlib.allocations.allocation_label`), not by its path (in place; returned)."""
    audit = data.get("audit", {})
    if isinstance(audit.get("allocation"), str):
        audit["allocation"] = allocation_label(audit["allocation"])
    return data
