"""Store integrity: checksums recorded at write time catch a deleted or corrupted chunk file and name
the array and block; per-block markers tell a resumed run what is finished; nothing is pickled."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from auditlib.exceptions import IntegrityError, StoreError
from storage import checksums, store
from storage import schema as S
from tests.unit.test_store import make_block, template

BLOCKS = {(1, 2): (4, 1), (2, 2): (3, 2), (1, 1): (2, 3)}


def built(tmp_path: Path, finalize: bool = True) -> str:
    """A store with three written blocks, the rest empty, a small group, finalized."""
    url = str(tmp_path / "s.zarr")
    template(url)
    for (s, g), (units, seed) in BLOCKS.items():
        store.write_residual_block(url, s, g, make_block(units, 2, seed))
    for s in range(3):
        for g in range(3):
            if (s, g) not in BLOCKS:
                store.write_residual_block(url, s, g, None)
    small = xr.Dataset(
        {"epl_pooled": (("geolevel", "query"), np.array([[0.5], [1.5], [np.nan]]))},
        coords={"geolevel": np.array(["US", "State", "County"], dtype=object)},
    )
    store.write_group(url, S.EPL, small)
    if finalize:
        store.finalize(url)
    return url


def chunk_file(url: str, name: str, state: int, geolevel: int) -> Path:
    """The first chunk file of a block's place on the item axis, of one residual variable."""
    grp = zarr.open_group(url, mode="r", zarr_format=3, path=S.RESIDUALS)
    first = int(np.asarray(grp["item_offset"][state, geolevel])) // int(grp["truth"].chunks[0])
    lead = ("0",) if name == "residual" else ()  # residual (replicate, item): one replicate chunk
    return Path(url, S.RESIDUALS, name, "c", *lead, str(first))


def test_sha256_digest_matches_hashlib_on_the_raw_bytes() -> None:
    a = np.arange(6, dtype="<i4").reshape(2, 3)
    expect = hashlib.sha256(b"(2, 3)" + b"<i4" + a.tobytes()).digest()
    assert checksums.digest(a) == expect
    # strings hash the same whatever their numpy representation (object, <U, StringDType)
    obj = np.array(["US", "ST01"], dtype=object)
    assert checksums.digest(obj) == checksums.digest(obj.astype("U4"))
    assert checksums.digest(obj) == hashlib.sha256(b"(2,)str:US\x00ST01").digest()
    assert checksums.digest(a) != checksums.digest(a.astype("<i8"))


def test_an_intact_store_verifies(tmp_path: Path) -> None:
    url = built(tmp_path)
    v = checksums.check(url)
    assert v.problems == [] and v.blocks == 9
    assert v.arrays >= 6  # sigma2, the coordinates, epl_pooled, ...


def test_a_deleted_chunk_is_named_by_array_and_block(tmp_path: Path) -> None:
    url = built(tmp_path)
    chunk = chunk_file(url, "residual", 1, 2)
    assert chunk.is_file()
    chunk.unlink()  # zarr now reads fill values (NaN) there without any error
    assert np.isnan(store.read_residuals(url, 1, 2)[0]).all()
    with pytest.raises(IntegrityError) as exc:
        checksums.check(url)
    msg = str(exc.value)
    assert "residuals/residual block (state=ST01, geolevel=County): checksum mismatch" in msg
    assert "ST02" not in msg  # only the damaged block is named
    v = checksums.verify(url)
    assert len(v.problems) == 1


def test_a_corrupted_chunk_is_named_by_array_and_block(tmp_path: Path) -> None:
    url = built(tmp_path)
    chunk = chunk_file(url, "truth", 2, 2)
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside the compressed frame
    chunk.write_bytes(bytes(data))
    v = checksums.verify(url)
    assert len(v.problems) == 1
    assert v.problems[0].startswith("residuals/truth block (state=ST02, geolevel=County)")


def test_a_damaged_small_array_is_named(tmp_path: Path) -> None:
    url = built(tmp_path)
    arr = zarr.open_group(url, mode="r+", zarr_format=3, path=S.EPL)["epl_pooled"]
    arr[1, 0] = 2.5  # a silent change after the run (not through dpaudit)
    v = checksums.verify(url)
    assert v.problems == ["epl/epl_pooled: checksum mismatch (missing or corrupt chunk)"]


def test_an_unfinished_store_is_refused(tmp_path: Path) -> None:
    url = built(tmp_path, finalize=False)
    assert not store.is_complete(url)
    with pytest.raises(IntegrityError, match="not a completed dpaudit store"):
        checksums.verify(url)
    store.finalize(url)
    assert store.is_complete(url)


def test_block_markers_list_exactly_the_written_blocks(tmp_path: Path) -> None:
    url = str(tmp_path / "s.zarr")
    template(url)
    assert store.done_blocks(url) == set()
    assert store.resume_point(url, "abc") == set()
    for (s, g), (units, seed) in BLOCKS.items():
        store.write_residual_block(url, s, g, make_block(units, 2, seed))
    store.write_residual_block(url, 0, 0, None)  # an empty region counts as written too
    assert store.done_blocks(url) == {*BLOCKS, (0, 0)}
    assert store.resume_point(url, "abc") == {*BLOCKS, (0, 0)}
    assert not store.group_complete(url, S.EPL)
    # another spec never resumes into this store
    with pytest.raises(StoreError, match=r"different spec \(run id 'abc', this spec 'xyz'\)"):
        store.resume_point(url, "xyz")
    assert store.resume_point(str(tmp_path / "none.zarr"), "abc") is None
    # a run killed while writing its template starts again from nothing
    half = str(tmp_path / "half.zarr")
    zarr.open_group(half, mode="w", zarr_format=3).attrs["run_id"] = "abc"
    assert store.resume_point(half, "abc") is None and not Path(half).exists()


def test_stale_stagings_are_other_runs_only(tmp_path: Path) -> None:
    url = str(tmp_path / "a.zarr")
    mine, other = store.staging_path(url, "r1"), store.staging_path(url, "r2")
    for p in (mine, other):
        Path(p).mkdir()
    Path(tmp_path / ".b.zarr.partial-r3").mkdir()  # another target's: not ours
    assert store.stale_stagings(url, "r1") == [Path(other)]


NUMERIC = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
NUMERIC |= {"float16", "float32", "float64", "complex64", "complex128", "string"}


def assert_no_pickles(url: str, storage_options: dict | None = None) -> int:
    """Every array's stored metadata (each ``zarr.json``, read as JSON, not through zarr) has a
    numeric or string data type and no codec that could hold a pickle; returns the array count."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
    n = 0
    for path in fs.find(root):
        if not path.endswith("zarr.json"):
            continue
        meta = json.loads(fs.cat_file(path))
        assert "consolidated_metadata" not in meta or meta["node_type"] == "group"
        if meta["node_type"] != "array":
            continue
        assert meta["data_type"] in NUMERIC, (path, meta["data_type"])
        names = [str(c.get("name", "")).lower() for c in meta.get("codecs", [])]
        assert not any("pickle" in c or "object" in c for c in names), (path, names)
        n += 1
    return n


def test_no_pickles_in_a_store(tmp_path: Path) -> None:
    url = built(tmp_path)
    assert assert_no_pickles(url) >= 10
    # the check has power: an array declared with a pickle codec (or an object dtype) is caught
    meta_path = Path(url, S.EPL, "epl_pooled", "zarr.json")
    meta = json.loads(meta_path.read_text())
    for change in (
        {"codecs": [*meta["codecs"], {"name": "numcodecs.pickle"}]},
        {"data_type": "object"},
    ):
        meta_path.write_text(json.dumps({**meta, **change}))
        with pytest.raises(AssertionError):
            assert_no_pickles(url)


def test_verify_command_exit_codes(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app

    runner = CliRunner()
    url = built(tmp_path)
    ok = runner.invoke(app, ["verify", url])
    assert ok.exit_code == 0, ok.output
    # residuals: state, geolevel, replicate, query, block_var, sigma2, item_offset, item_capacity;
    # epl: geolevel, epl_pooled
    assert ok.stdout.strip() == f"ok: {url}: 10 arrays and 9 blocks match their checksums"
    missing = runner.invoke(app, ["verify", str(tmp_path / "nope.zarr")])
    assert missing.exit_code == 2 and "not found" in missing.stderr
    chunk_file(url, "cell_index", 1, 1).unlink()
    bad = runner.invoke(app, ["verify", url])
    assert bad.exit_code == 1
    assert (
        "residuals/cell_index block (state=ST01, geolevel=State): checksum mismatch" in bad.stderr
    )
    report = runner.invoke(app, ["report", url, "-o", str(tmp_path / "r.html")])
    assert report.exit_code == 1 and "failed its integrity check" in report.stderr
    assert not (tmp_path / "r.html").exists()
