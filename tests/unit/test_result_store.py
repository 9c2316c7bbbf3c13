"""``ResultStore``: the store object the CLI, the flows and the report hold, checked against the
module functions it delegates to, on real small Zarr stores."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from auditlib.exceptions import StoreError
from storage import checksums, locks, residual_blocks, staging, store, targets
from storage import schema as S
from storage.result_store import ResultStore
from tests.unit.test_store import make_block


def _template(rs: ResultStore, run_id: str = "abc") -> None:
    rs.create_residual_template(
        states=["US", "ST01", "ST02"],
        geolevels=["US", "State", "County"],
        replicates=2,
        n_items=12,
        queries=["q"],
        sigma2=np.full((3, 1), 4.0),
        attrs={"run_id": run_id},
    )


def _small_group() -> xr.Dataset:
    return xr.Dataset(
        {"epl": ("geolevel", np.array([0.25, 0.5])), "name": ("geolevel", np.array(["a", "bb"]))},
        coords={"geolevel": ["State", "County"]},
        attrs={"note": "small"},
    )


def test_at_makes_the_url_absolute_and_keeps_the_spelling(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    rs = ResultStore.at("out/s.zarr")
    assert rs.url == targets.absolute("out/s.zarr") == str(tmp_path / "out" / "s.zarr")
    assert rs.shown == "out/s.zarr" and str(rs) == rs.url
    assert rs == ResultStore.at(str(tmp_path / "out" / "s.zarr"))  # the spelling is not identity
    assert not rs.remote
    assert ResultStore.of(rs) is rs and ResultStore.of("out/s.zarr") == rs  # a flow given a path
    remote = ResultStore.at("s3://bucket/s.zarr", {"anon": True})
    assert remote.url == "s3://bucket/s.zarr" and remote.remote
    assert remote.storage_options == {"anon": True}


def test_pickles_with_everything_it_holds(tmp_path: Path) -> None:
    rs = ResultStore.at(str(tmp_path / "s.zarr"), {"key": "value"})
    back = pickle.loads(pickle.dumps(rs))
    assert back == rs and back.url == rs.url and back.shown == rs.shown
    assert back.storage_options == {"key": "value"}
    assert hash(back) == hash(rs)
    with pytest.raises(AttributeError):
        rs.url = "elsewhere"  # type: ignore[misc]


def test_a_group_written_through_it_is_read_back_by_xarray(tmp_path: Path) -> None:
    rs = ResultStore.at(str(tmp_path / "s.zarr"))
    assert not rs.exists()
    _template(rs)
    assert rs.exists() and rs.template_complete() == residual_blocks.template_complete(rs.url)
    assert rs.is_dpaudit_store("abc") and rs.root_attrs()["run_id"] == "abc"
    ds = _small_group()
    rs.write_group(S.EPL, ds)
    assert rs.group_complete(S.EPL) and store.group_complete(rs.url, S.EPL)
    rs.set_root_attrs({"wall_time_s": np.float64(1.5)})
    for s, g in [(0, 0), (1, 1), (1, 2), (2, 1), (2, 2), (0, 1), (0, 2), (1, 0), (2, 0)]:
        rs.write_residual_block(s, g, make_block(3, 2, s * 3 + g) if s and g else None)
    rs.finalize()
    assert rs.is_complete() and targets.is_complete(rs.url)
    back = xr.open_zarr(rs.url, group=S.EPL, consolidated=True).load()
    np.testing.assert_array_equal(back.epl.values, ds.epl.values)
    assert list(back.name.values) == ["a", "bb"] and back.attrs["note"] == "small"
    xr.testing.assert_identical(rs.open_group(S.EPL), store.open_group(rs.url, S.EPL))
    assert rs.groups() == store.groups(rs.url) and S.EPL in rs.groups()
    assert rs.root_attrs()["wall_time_s"] == 1.5
    assert rs.group_attrs(S.EPL) == targets.group_attrs(rs.url, S.EPL)
    v = rs.verify()
    assert not v.problems and v.arrays == checksums.verify(rs.url).arrays
    rs.check()
    assert rs.check_documents() == len(list(Path(rs.url).rglob("zarr.json")))


def test_raw_reads_see_an_unfinished_store_and_the_finished_one_read_once(tmp_path: Path) -> None:
    """``zarr_group`` and ``dataset`` read the store as it is (a staging store too), with the
    store's storage options; ``completed_attrs`` is ``root_attrs`` of a completed store only."""
    rs = ResultStore.at(str(tmp_path / "s.zarr"))
    _template(rs)
    rs.write_group(S.EPL, _small_group())
    assert rs.completed_attrs() is None and not rs.is_complete()  # unfinished
    grp = rs.zarr_group("kept/a", mode="a")
    grp.create_array("x", data=np.arange(3))
    np.testing.assert_array_equal(rs.zarr_group("kept/a")["x"][...], np.arange(3))
    with pytest.raises(FileNotFoundError):
        rs.zarr_group("absent")
    got = rs.dataset(S.EPL, consolidated=False)
    want = xr.open_zarr(rs.url, group=S.EPL, consolidated=False, chunks=None)
    xr.testing.assert_identical(got.load(), want.load())
    with pytest.raises((KeyError, FileNotFoundError)):
        rs.dataset("absent", consolidated=False)
    rs.drop_group("kept")
    for s, g in [(0, 0), (1, 1), (1, 2), (2, 1), (2, 2), (0, 1), (0, 2), (1, 0), (2, 0)]:
        rs.write_residual_block(s, g, make_block(3, 2, s * 3 + g) if s and g else None)
    rs.finalize()
    assert rs.completed_attrs() == rs.root_attrs() and rs.completed_attrs()["run_id"] == "abc"
    xr.testing.assert_identical(rs.dataset(S.EPL).load(), rs.open_group(S.EPL).load())


def test_blocks_and_reads_agree_with_the_module_functions(tmp_path: Path) -> None:
    rs = ResultStore.at(str(tmp_path / "s.zarr"))
    _template(rs)
    block = make_block(4, 2, 1)
    rs.write_residual_block(1, 2, block)
    assert rs.done_blocks() == residual_blocks.done_blocks(rs.url) == {(1, 2)}
    assert rs.done_ranges() == residual_blocks.done_ranges(rs.url)
    assert rs.pending_blocks() == residual_blocks.pending_blocks(rs.url)
    assert rs.block_place(1, 2) == residual_blocks.block_place(rs.url, 1, 2)
    assert rs.replicate_chunk() == residual_blocks.replicate_chunk(rs.url) == 2
    res, q = rs.read_residuals(1, 2)
    np.testing.assert_array_equal(res, block.residual)
    np.testing.assert_array_equal(q, block.query_index)
    np.testing.assert_array_equal(rs.read_query_index(1, 2), block.query_index)
    np.testing.assert_array_equal(rs.read_residual_rows(1, 2, 1), block.residual[:1])
    # rows from a start (an EPL piece reads a block's replicates in ranges), fewer at the end
    assert block.residual.shape[0] >= 2
    np.testing.assert_array_equal(rs.read_residual_rows(1, 2, 1, start=1), block.residual[1:2])
    np.testing.assert_array_equal(rs.read_residual_rows(1, 2, 5, start=1), block.residual[1:])
    np.testing.assert_array_equal(rs.read_items(1, 2)[0], block.truth)
    np.testing.assert_array_equal(rs.read_cells(1, 2), residual_blocks.read_cells(rs.url, 1, 2))
    assert rs.resume_point("abc") == {(1, 2)}
    with pytest.raises(StoreError, match="different spec"):
        rs.resume_point("other")


def test_parts_of_a_resumable_run(tmp_path: Path) -> None:
    rs = ResultStore.at(str(tmp_path / "p.zarr"))
    assert rs.claim_staging("run1") is False
    assert rs.claim_staging("run1") is True
    with pytest.raises(StoreError, match="different command"):
        rs.claim_staging("run2")
    arrays = {"x": ((4,), (2,), "float64")}
    assert rs.chunk_parts("parts", arrays, (2,)) == set()
    rs.write_part("parts", (1,), {"x": ((slice(2, 4),), np.array([3.0, 4.0]))})
    assert rs.done_parts("parts") == store.done_parts(rs.url, "parts") == {(1,)}
    assert rs.chunk_parts("parts", arrays, (2,)) == {(1,)}
    np.testing.assert_array_equal(rs.read_parts("parts")["x"][2:], [3.0, 4.0])
    rs.drop_group("parts")
    assert "parts" not in rs.groups()


def test_staging_publish_and_discard(tmp_path: Path) -> None:
    target = ResultStore.at(str(tmp_path / "s.zarr"))
    staged = target.staged("r1")
    assert staged.url == staging.staging_path(target.url, "r1") and staged.shown == staged.url
    target.check_target(overwrite=False)  # nothing there yet
    _template(staged, "r1")
    for s in range(3):
        for g in range(3):
            staged.write_residual_block(s, g, None)
    staged.finalize()
    target.publish(staged)
    assert target.is_complete() and not staged.exists()
    with pytest.raises(StoreError, match="already exists"):
        target.check_target(overwrite=False)
    target.check_target(overwrite=True)
    # another run's staging copy is stale for r2, and discarded after its failure
    other = target.staged("r0")
    _template(other, "r0")
    assert [str(p) for p in target.stale_stagings("r2")] == [other.url]
    target.discard(other)
    assert not other.exists() and target.is_complete()
    target.remove()
    assert not target.exists()


def test_check_target_looks_at_the_path_as_given(tmp_path: Path, monkeypatch) -> None:
    real = ResultStore.at(str(tmp_path / "real.zarr"))
    _template(real)
    (tmp_path / "link.zarr").symlink_to(tmp_path / "real.zarr")
    monkeypatch.chdir(tmp_path)
    link = ResultStore.at("link.zarr")
    assert link.url == real.url  # resolved: the workers write the real store
    with pytest.raises(StoreError, match=r"'link.zarr' is a symbolic link"):
        link.check_target(overwrite=True)


def test_the_lock_is_the_module_lock(tmp_path: Path) -> None:
    rs = ResultStore.at(str(tmp_path / "s.zarr"))
    assert rs.lock_path() == locks.lock_path(rs.url)
    with rs.exclusive():
        assert rs.lock_path().exists()
        # a second run on the same store (a flock of another open file) is refused, either way
        with pytest.raises(StoreError, match="another dpaudit run"), locks.exclusive(rs.url):
            pass
        with pytest.raises(StoreError, match="another dpaudit run"):
            with ResultStore.at(rs.url).exclusive():
                pass
    assert not rs.lock_path().exists()
    with locks.exclusive(rs.url):  # released
        pass
