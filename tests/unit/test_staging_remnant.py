"""What a write still under way leaves once its run's staging copy is removed (a task on a cluster
that outlives the failed run): chunk files and no store. The next run of the spec removes exactly
that and starts again; anything else at the staging copy's place is refused and left alone."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import zarr

from auditlib.exceptions import StoreError
from storage import staging
from storage.result_store import ResultStore
from tests.unit.test_result_store import _template
from tests.unit.test_store_safety import tree


def remains(url: str) -> Path:
    """A staged store's residual chunks written for real, then everything but the chunk files
    removed: the tree zarr's writes make again below a removed copy (their directories made on
    the way to each chunk file, no metadata document)."""
    _template(ResultStore.at(url), "r1")
    group = zarr.open_group(url, mode="r+", zarr_format=3)
    array = group.create_array("late", shape=(40, 40), chunks=(10, 10), dtype="f8")
    array[:] = np.arange(1600.0).reshape(40, 40)
    root = Path(url)
    for p in sorted(root.rglob("*"), reverse=True):
        if p.is_file() and not p.parent.name.isdigit() and p.parent.name != "c":
            p.unlink()  # metadata documents, the lock, anything not a chunk
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()
    assert not (root / "zarr.json").exists()
    assert len(list(root.glob("late/c/*/*"))) == 16
    return root


def test_the_remains_of_a_removed_copy_are_removed_before_the_run(tmp_path: Path) -> None:
    target = ResultStore.at(str(tmp_path / "s.zarr"))
    staged = target.staged("r1")
    root = remains(staged.url)
    assert staging.is_remnant(staged.url)
    assert staged.make_room() is True and not root.exists()
    # what the run may use is left to it: nothing, an empty directory, a dpaudit store
    assert staged.make_room() is False
    root.mkdir()
    assert staged.make_room() is False and root.is_dir()
    _template(staged, "r1")
    before = tree(root)
    assert not staging.is_remnant(staged.url)
    assert staged.make_room() is False and tree(root) == before


def test_a_failed_run_discards_the_remains_too(tmp_path: Path) -> None:
    # a scheduled run discards its copy before it starts, and after it fails
    target = ResultStore.at(str(tmp_path / "s.zarr"))
    staged = target.staged("r1")
    root = remains(staged.url)
    target.discard(staged)
    assert not root.exists()


@pytest.mark.parametrize("extra", ["file", "symlink", "fifo", "link dir"])
def test_anything_else_at_the_copys_place_is_refused_and_kept(tmp_path: Path, extra: str) -> None:
    target = ResultStore.at(str(tmp_path / "s.zarr"))
    staged = target.staged("r1")
    root = remains(staged.url)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("precious\n")
    inside = root / "late" / "c" / "0"
    if extra == "file":
        (root / "notes.txt").write_text("mine\n")
    elif extra == "symlink":
        (inside / "9").symlink_to(elsewhere / "keep.txt")  # a chunk's name, not a chunk file
    elif extra == "fifo":
        os.mkfifo(inside / "9")
    else:
        (root / "late" / "c" / "7").symlink_to(elsewhere, target_is_directory=True)
    before, kept = tree(root), tree(elsewhere)  # a FIFO is no file: not read
    assert not staging.is_remnant(staged.url)
    with pytest.raises(StoreError, match="move it away and run again") as exc:
        staged.make_room()
    assert repr(staged.url) in str(exc.value)
    target.discard(staged)  # a failed run's discard leaves it too
    assert tree(root) == before and tree(elsewhere) == kept
    # nor is it another spec's stale copy, which the next run would clear
    assert staging.stale_stagings(target.url, "r2") == []


def test_only_a_staging_copys_name_can_hold_remains(tmp_path: Path) -> None:
    # the same chunk files at a store's own path (a user's half-copied store) are not remains
    copied = remains(str(tmp_path / "copied.zarr"))
    before = tree(copied)
    assert not staging.is_remnant(str(copied))
    assert staging.remove_remnant(str(copied)) is False and tree(copied) == before
    with pytest.raises(StoreError, match="move it away"):
        staging.make_room(str(copied))
    assert tree(copied) == before


def test_another_runs_remains_are_stale_and_a_foreign_copy_is_not(tmp_path: Path) -> None:
    url = str(tmp_path / "a.zarr")
    theirs = remains(staging.staging_path(url, "r2"))
    odd = remains(staging.staging_path(url, "r3"))
    (odd / "notes.txt").write_text("mine\n")
    assert staging.stale_stagings(url, "r1") == [theirs]
