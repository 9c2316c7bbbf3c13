"""A store's metadata documents (``zarr.json``) are read only once checked to be regular files of at
most ``MAX_DOCUMENT_BYTES``: a FIFO (which would block a reader), a link to ``/dev/zero`` (which
never ends) or an oversized file is refused with one error naming it, by every reader."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditlib.exceptions import StoreError
from flows.cli.app import app
from storage import checksums, files, store
from tests.unit.test_store_integrity import built
from tests.unit.test_store_safety import node_documents


def oversized(path: Path) -> None:
    """A sparse file one byte over the cap (no disk used): read whole, it would be 64 MiB of NULs."""
    path.unlink()
    with path.open("wb") as fh:
        fh.truncate(files.MAX_DOCUMENT_BYTES + 1)


def test_every_document_of_an_intact_store_is_checked(tmp_path: Path) -> None:
    url = built(tmp_path)
    assert files.check_documents(url) == len(node_documents(url)) + 1  # and the root's
    assert files.MAX_DOCUMENT_BYTES == 64 * 2**20


@pytest.mark.parametrize("node", ["zarr.json", "residuals/zarr.json", "epl/epl_pooled/zarr.json"])
@pytest.mark.parametrize("damage", ["fifo", "dev-zero", "oversized"])
def test_a_document_that_is_no_bounded_file_is_named(
    tmp_path: Path, node: str, damage: str
) -> None:
    url = built(tmp_path)
    doc = Path(url, node)
    if damage == "oversized":
        oversized(doc)
        what = "more than the 64 MiB a metadata document may hold (MAX_DOCUMENT_BYTES)"
    else:
        doc.unlink()
        if damage == "fifo":
            os.mkfifo(doc)
            what = "is a FIFO (named pipe)"
        else:
            doc.symlink_to("/dev/zero")
            what = "is a character device"
    with pytest.raises(StoreError) as info:
        files.check_documents(url)
    assert f"metadata document {str(doc)!r}" in str(info.value) and what in str(info.value)
    with pytest.raises(StoreError, match="metadata document"):
        checksums.verify(url)
    res = CliRunner().invoke(app, ["verify", url])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and what in res.stderr


def test_an_oversized_root_is_not_read_by_any_reader(tmp_path: Path) -> None:
    url = built(tmp_path)
    oversized(Path(url, "zarr.json"))
    for read in (store.root_attrs, store.groups, lambda u: store.open_group(u, "epl")):
        with pytest.raises(StoreError, match="MAX_DOCUMENT_BYTES"):
            read(url)
    with pytest.raises(StoreError, match="MAX_DOCUMENT_BYTES"):
        store.is_dpaudit_store(url)
    with pytest.raises(StoreError, match="MAX_DOCUMENT_BYTES"):
        store.check_target(url, overwrite=True)
    from flows.report.store_data import open_store
    from storage.residuals import open_residuals

    for read in (lambda u: open_store(u, None), open_residuals):
        with pytest.raises(StoreError, match="MAX_DOCUMENT_BYTES"):
            read(url)
