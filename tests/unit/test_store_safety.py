"""What dpaudit may delete: only a store it created (or an empty directory), never anything else —
not with ``--overwrite``, not when it discards, publishes or clears staging copies. And ``verify``
checks every node's own metadata document, not only the consolidated copy readers use."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr
from typer.testing import CliRunner

from auditlib.exceptions import StoreError
from flows.cli.app import app
from storage import checksums, root_document, store
from storage import schema as S
from tests.integration._stores import finished_store
from tests.unit.test_store import template
from tests.unit.test_store_integrity import built, chunk_file


def tree(path: Path) -> dict[str, bytes]:
    """Every file below ``path`` (or ``path`` itself) with its bytes: to show nothing was touched."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def victim(tmp_path: Path) -> Path:
    d = tmp_path / "victim"
    d.mkdir(parents=True)
    (d / "important.txt").write_text("precious\n")
    return d


def foreign_zarr(path: Path) -> Path:
    """A Zarr v3 store someone else wrote (no dpaudit mark)."""
    root = zarr.open_group(str(path), mode="w", zarr_format=3, attributes={"owner": "someone"})
    root.create_array("x", shape=(4,), dtype="int32")[...] = np.arange(4)
    return path


def finished(path: Path, run_id: str = "abc") -> Path:
    finished_store(str(path), run_id)
    return path


# --- 1. --overwrite and every other deletion ------------------------------------------------------


def test_overwrite_refuses_a_directory_that_is_not_a_store(tmp_path: Path) -> None:
    d = victim(tmp_path)
    before = tree(d)
    for overwrite in (True, False):
        with pytest.raises(StoreError) as exc:
            store.check_target(str(d), overwrite=overwrite)
        msg = str(exc.value)
        assert repr(str(d)) in msg and "not a dpaudit store" in msg
        assert "choose another output.store" in msg
    assert tree(d) == before


@pytest.mark.parametrize("kind", ["file", "foreign zarr", "symlink to a store"])
def test_overwrite_refuses_anything_else_that_is_not_dpaudits(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "out.zarr"
    if kind == "file":
        target.write_text("precious\n")
        watched = target
    elif kind == "foreign zarr":
        watched = foreign_zarr(target)
    else:
        watched = finished(tmp_path / "real.zarr")
        target.symlink_to(watched)
    before = tree(watched)
    with pytest.raises(StoreError, match=r"dpaudit never replaces or deletes it"):
        store.check_target(str(target), overwrite=True)
    with pytest.raises(StoreError, match=r"dpaudit never replaces or deletes it"):
        store.remove(str(target))
    assert tree(watched) == before


def test_a_dpaudit_store_finished_or_not_and_an_empty_directory_may_be_replaced(
    tmp_path: Path,
) -> None:
    done = finished(tmp_path / "done.zarr")
    partial = tmp_path / "partial.zarr"
    template(str(partial))  # a run's store before it finished
    empty = tmp_path / "empty.zarr"
    empty.mkdir()
    for p in (done, partial):
        assert store.is_dpaudit_store(str(p))
        with pytest.raises(StoreError, match="already exists; pass --overwrite"):
            store.check_target(str(p), overwrite=False)
        store.check_target(str(p), overwrite=True)
    store.check_target(str(empty), overwrite=False)
    store.check_target(str(empty), overwrite=True)
    assert not store.is_dpaudit_store(str(foreign_zarr(tmp_path / "f.zarr")))
    # a staging copy of the mpl/direct/sweep flows carries the mark from its first write
    claimed = store.staging_path(str(tmp_path / "m.zarr"), "r9")
    store.claim_staging(claimed, "r9")
    assert store.is_dpaudit_store(claimed)
    # publishing over the empty directory puts the store there
    staging = finished(Path(store.staging_path(str(empty), "abc")))
    store.publish(str(staging), str(empty))
    assert store.is_complete(str(empty)) and not staging.exists()


def test_cli_run_with_overwrite_leaves_a_foreign_directory_alone(tmp_path: Path) -> None:
    from tests.integration._specs import tiny_spec, to_toml

    spec = tmp_path / "tiny.toml"
    spec.write_text(to_toml(tiny_spec()))
    d = victim(tmp_path)
    res = CliRunner().invoke(
        app, ["run", str(spec), "--store", str(d), "--overwrite", "--no-report"]
    )
    assert res.exit_code == 2, res.output
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("dpaudit: error: ")
    assert str(d) in res.stderr and "not a dpaudit store" in res.stderr
    assert (d / "important.txt").read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.toml", "victim"]


def test_discard_stale_stagings_and_publish_delete_only_dpaudit_stores(tmp_path: Path) -> None:
    url = str(tmp_path / "a.zarr")
    # staging-named directories dpaudit did not write are never listed, discarded or removed
    odd = Path(store.staging_path(url, "r2"))
    odd.mkdir()
    (odd / "notes.txt").write_text("mine")
    odd_zarr = foreign_zarr(Path(store.staging_path(url, "r3")))
    ours = finished(Path(store.staging_path(url, "r4")), run_id="r4")
    empty = Path(store.staging_path(url, "r5"))
    empty.mkdir()
    assert store.stale_stagings(url, "r1") == sorted([ours, empty])
    before = {p: tree(p) for p in (odd, odd_zarr)}
    store.discard(str(odd), url)
    store.discard(str(odd_zarr), url)
    with pytest.raises(StoreError, match="refusing to delete"):
        store.remove(str(odd))
    with pytest.raises(StoreError, match="refusing to delete"):
        store.resume_point(str(odd_zarr), "r3")  # a foreign root is never 'a half template'
    assert {p: tree(p) for p in (odd, odd_zarr)} == before
    store.discard(str(ours), url)
    assert not ours.exists()
    # publish: a target that turned into something else during the run is not replaced
    staging = finished(Path(store.staging_path(url, "r6")), run_id="r6")
    target = victim(tmp_path / "t")
    with pytest.raises(StoreError, match=r"refusing to replace .*finished run is kept in"):
        store.publish(str(staging), str(target))
    assert (target / "important.txt").read_text() == "precious\n" and store.is_complete(
        str(staging)
    )
    # ... nor a foreign '.<name>.old' beside a dpaudit target
    target2 = finished(tmp_path / "b.zarr")
    old = tmp_path / ".b.zarr.old"
    old.mkdir()
    (old / "keep.txt").write_text("mine")
    with pytest.raises(StoreError, match=r"\.b\.zarr\.old"):
        store.publish(str(staging), str(target2))
    assert (old / "keep.txt").read_text() == "mine" and store.is_complete(str(target2))
    old.joinpath("keep.txt").unlink()
    old.rmdir()
    store.publish(str(staging), str(target2))
    assert store.root_attrs(str(target2))["run_id"] == "r6" and not old.exists()


def test_a_half_written_template_is_marked_from_its_first_write(tmp_path: Path) -> None:
    url = tmp_path / ".s.zarr.partial-abc"
    template(str(url))
    meta = json.loads((url / "zarr.json").read_text())
    assert meta["attributes"][S.STORE_ATTR] is True
    # a run killed before the template was complete is recognised and started again
    zarr.open_group(str(url), mode="r+", zarr_format=3, path=S.RESIDUALS).attrs[
        S.TEMPLATE_COMPLETE_ATTR
    ] = False
    assert store.resume_point(str(url), "abc") is None and not url.exists()


# --- 3. metadata documents ------------------------------------------------------------------------


def node_documents(url: str) -> list[str]:
    return sorted(
        str(p.relative_to(url)) for p in Path(url).rglob("zarr.json") if p.parent != Path(url)
    )


def test_an_untouched_store_verifies_its_metadata(tmp_path: Path) -> None:
    url = built(tmp_path)
    v = checksums.verify(url)
    assert v.problems == [] and v.notes == []
    # every node's own document, the root's and the consolidated copy of each node in it
    assert v.metadata == 2 * len(node_documents(url)) + 1 >= 25
    assert sorted(store.root_attrs(url)[S.METADATA_SHA256_ATTR]) == node_documents(url)
    consolidated = store.root_attrs(url)[S.ROOT_SHA256_ATTR]["consolidated"]
    assert sorted(f"{p}/zarr.json" for p in consolidated) == node_documents(url)


@pytest.mark.parametrize("node", ["residuals/truth/zarr.json", "epl/zarr.json"])
def test_a_garbled_node_document_is_named(tmp_path: Path, node: str) -> None:
    url = built(tmp_path)
    Path(url, node).write_text("{")
    # readers of the consolidated copy see nothing wrong; a reader of the node itself fails
    xr.open_zarr(url, group=node.split("/")[0], consolidated=True).load()
    with pytest.raises(Exception):  # noqa: B017 - zarr's own error for a broken document
        xr.open_zarr(url, group=node.split("/")[0], consolidated=False).load()
    v = checksums.verify(url)
    assert v.problems == [f"{node}: metadata checksum mismatch (corrupt or changed)"]
    res = CliRunner().invoke(app, ["verify", url])
    assert res.exit_code == 1 and node in res.stderr


def test_a_removed_or_added_node_document_is_named(tmp_path: Path) -> None:
    url = built(tmp_path)
    Path(url, "residuals/sigma2/zarr.json").unlink()
    zarr.open_group(url, mode="r+", zarr_format=3, use_consolidated=False).create_group("extra")
    problems = checksums.verify(url).problems
    assert "residuals/sigma2/zarr.json: missing (its metadata digest is recorded)" in problems
    assert "extra/zarr.json: no metadata digest recorded (added after the run)" in problems


def test_a_store_without_metadata_digests_still_verifies_its_data(tmp_path: Path) -> None:
    url = built(tmp_path)
    chunk = chunk_file(url, "truth", 2, 2)
    root = Path(url, "zarr.json")
    meta = json.loads(root.read_text())
    del meta["attributes"][S.METADATA_SHA256_ATTR]  # as finalized before the records existed
    del meta["attributes"][S.ROOT_SHA256_ATTR]
    root.write_text(json.dumps(meta))
    Path(url, "residuals/truth/zarr.json").write_text("{")  # not detectable without the record
    v = checksums.verify(url)
    assert v.problems == [] and v.metadata == 0 and v.blocks == 9
    assert v.notes == [root_document.NO_ROOT_DIGESTS, checksums.NO_METADATA_DIGESTS]
    assert "run the audit again (with --overwrite) to record them" in root_document.NO_ROOT_DIGESTS
    chunk.unlink()  # its data still is checked
    assert checksums.verify(url).problems == [
        "residuals/truth block (state=ST02, geolevel=County): checksum mismatch "
        "(missing or corrupt chunk)"
    ]


# --- 4. the root document and its consolidated copies -------------------------------------------


def forge(url: str, change: str) -> None:
    """Edit the root zarr.json by hand, as someone might: an attribute, or a consolidated copy."""
    root = Path(url, "zarr.json")
    meta = json.loads(root.read_text())
    if change == "attribute":
        meta["attributes"]["seed"] = 12345
    else:
        meta["consolidated_metadata"]["metadata"]["epl"]["attributes"]["allocation"] = "forged"
    root.write_text(json.dumps(meta, indent=2))


FORGED = {
    "attribute": "zarr.json: metadata checksum mismatch (the root document: its attributes "
    "corrupt or changed)",
    "consolidated": "zarr.json: consolidated copy of epl/zarr.json: metadata checksum mismatch "
    "(corrupt or changed)",
}


@pytest.mark.parametrize("change", sorted(FORGED))
def test_a_forged_root_document_does_not_verify(tmp_path: Path, change: str) -> None:
    url = built(tmp_path)
    forge(url, change)
    # what readers see is the forged value: the node's own document still holds the true one
    if change == "attribute":
        assert store.root_attrs(url)["seed"] == 12345
    else:
        assert xr.open_zarr(url, group="epl", consolidated=True).attrs["allocation"] == "forged"
        assert "allocation" not in json.loads(Path(url, "epl", "zarr.json").read_text())
    assert checksums.verify(url).problems == [FORGED[change]]
    res = CliRunner().invoke(app, ["verify", url])
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.splitlines() == [
        f"dpaudit: error: store {url!r} failed its integrity check: {FORGED[change]}; re-run the "
        "audit (with --overwrite) to rebuild it"
    ]
    out = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["report", url, "-o", str(out)])
    assert res.exit_code == 1 and not out.exists()
    assert len(res.stderr.splitlines()) == 1 and FORGED[change] in res.stderr
    res = CliRunner().invoke(app, ["compare", url, url])
    assert res.exit_code == 2 and res.stdout == ""
    assert (
        len(res.stderr.splitlines()) == 1 and "failed its integrity check: zarr.json" in res.stderr
    )


def test_the_root_digests_ignore_layout_only(tmp_path: Path) -> None:
    url = built(tmp_path)
    root = Path(url, "zarr.json")
    meta = json.loads(root.read_text())
    root.write_text(json.dumps(meta, sort_keys=True))  # the same document, laid out otherwise
    v = checksums.verify(url)
    assert v.problems == [] and v.notes == []
    meta["consolidated_metadata"]["metadata"]["extra"] = meta["consolidated_metadata"]["metadata"][
        "epl"
    ]
    root.write_text(json.dumps(meta))
    assert checksums.verify(url).problems == [
        "zarr.json: consolidated copy of extra/zarr.json: no digest recorded (added after the run)"
    ]
