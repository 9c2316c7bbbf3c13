"""Residual layout 4: a block is written, read back and verified as the whole chunks of its items,
in pieces, never as its planned capacity; stores of layout 3 (digests over the capacity) still
verify by their own rule."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import zarr

from auditlib.simulate import ResidualParts
from storage import checksums, residual_blocks, residuals, store
from storage import schema as S
from tests.unit.test_store import make_block, template


def chunk_files(url: str, name: str) -> list[str]:
    root = Path(url) / S.RESIDUALS / name / "c"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_block_is_written_as_its_items_not_its_capacity(tmp_path: Path) -> None:
    """A block planned at 2³¹ items that holds 12 writes one chunk of each variable, reads back,
    verifies, and is caught when that chunk is lost (writing its capacity took 16 GiB before)."""
    url = str(tmp_path / "s.zarr")
    planned = np.zeros((3, 3), np.int64)
    planned[1, 2] = 2**31
    template(url, planned)
    block = make_block(4, 2, 1)  # 12 items
    assert store.write_residual_block(url, 1, 2, block) == 12
    off, cap, span = store.block_place(url, 1, 2)
    chunk = int(residual_blocks.residual_array(url, "truth").chunks[0])
    assert (cap, span) == (2**31, chunk) and off % chunk == 0
    first = off // chunk
    assert chunk_files(url, "residual") == [f"0/{first}"]  # one replicate chunk, one item chunk
    assert chunk_files(url, "query_index") == [str(first)]  # −1 padding of that chunk only
    got, qi = store.read_residuals(url, 1, 2)
    np.testing.assert_array_equal(got, block.residual)
    np.testing.assert_array_equal(qi, block.query_index)
    for s in range(3):
        for g in range(3):
            if (s, g) != (1, 2):
                store.write_residual_block(url, s, g, None)
    store.finalize(url)
    assert checksums.verify(url).problems == []
    (Path(url) / S.RESIDUALS / "query_index" / "c" / str(first)).unlink()
    assert checksums.verify(url).problems == [
        "residuals/query_index block (state=ST01, geolevel=County): checksum mismatch (missing or "
        "corrupt chunk)"
    ]


def test_pieces_change_nothing_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block of three chunks written in pieces of one chunk stores the same chunks and digests
    as one written in one piece, and so does the block given as parts cut elsewhere than the
    pieces (a piece then spans two or three of them); its digests are those of its whole arrays
    (read at once)."""
    planned = np.full((3, 3), 150_000, np.int64)
    block = make_block(50_000, 2, 3)  # 150,000 items: three chunks of 65,536
    cuts = [0, 7, 65_530, 65_540, 65_541, 150_000]  # parts of 7, 65,523, 10, 1 and 84,459 items
    parts = ResidualParts(tuple(block.items(a, b) for a, b in itertools.pairwise(cuts)))
    assert parts.n_items == block.n_items
    urls = {}
    for name, piece, given in (
        ("one", residuals.PIECE_BYTES, block),
        ("small", 1, block),
        ("parts", 1, parts),
    ):
        monkeypatch.setattr(residuals, "PIECE_BYTES", piece)
        urls[name] = url = str(tmp_path / f"{name}.zarr")
        template(url, planned)
        assert store.write_residual_block(url, 1, 2, given) == 150_000
    assert residuals.pieces(3 * 65_536, 65_536, 2) == [(0, 65_536), (65_536, 131_072),
                                                       (131_072, 196_608)]  # fmt: skip
    for var in ("residual", "truth", "query_index", "unit_index", "cell_index"):
        one, *others = (chunk_files(u, var) for u in urls.values())
        assert one and all(o == one for o in others), var
        for f in one:
            first, *rest = (
                (Path(u) / S.RESIDUALS / var / "c" / f).read_bytes() for u in urls.values()
            )
            assert all(r == first for r in rest), (var, f)
    url = urls["small"]
    recorded = np.asarray(residual_blocks.residual_array(url, S.BLOCK_SHA256)[1, 2])
    np.testing.assert_array_equal(
        recorded, np.asarray(residual_blocks.residual_array(urls["one"], S.BLOCK_SHA256)[1, 2])
    )
    off, _, span = store.block_place(url, 1, 2)
    assert span == 3 * 65_536
    for v, var in enumerate(S.RESIDUAL_BLOCK_VARS[1:-1], start=1):
        whole = np.asarray(residual_blocks.residual_array(url, var)[off : off + span])
        assert checksums.digest(whole) == recorded[v].tobytes(), var
    rows = np.asarray(residual_blocks.residual_array(url, "residual")[:, off : off + span])
    reps = np.asarray(residual_blocks.residual_array(url, residuals.REPLICATE_SHA256)[1, 2])
    assert [checksums.digest(r) for r in rows] == [r.tobytes() for r in reps]


def as_layout_3(url: str, state: int, level: int) -> None:
    """Rewrite a block as layout 3 wrote it: padded to the end of its capacity's last chunk, its
    digests over that span (an independent writer of the older format)."""
    off, cap, _ = store.block_place(url, state, level)
    chunk = int(residual_blocks.residual_array(url, "truth").chunks[0])
    end = off + int(-(-cap // chunk) * chunk)
    n = int(np.asarray(residual_blocks.residual_array(url, "n_items")[state, level]))
    digests = []
    for name, pad in (("truth", 0), ("query_index", -1), ("unit_index", 0), ("cell_index", 0)):
        arr = residual_blocks.residual_array(url, name, mode="r+")
        arr[off + n : end] = np.full(end - off - n, pad, arr.dtype)
        digests.append(checksums.digest(np.asarray(arr[off:end])))
    res = residual_blocks.residual_array(url, "residual", mode="r+")
    res[:, off + n : end] = np.nan
    reps = np.stack([np.frombuffer(checksums.digest(r), np.uint8) for r in res[:, off:end]])
    residual_blocks.residual_array(url, residuals.REPLICATE_SHA256, mode="r+")[state, level] = reps
    count = checksums.digest(residual_blocks.residual_array(url, "n_items")[state : state + 1,
                                                                            level : level + 1])  # fmt: skip
    rows = [residuals.split_digest(reps), *digests, count]
    residual_blocks.residual_array(url, S.BLOCK_SHA256, mode="r+")[state, level] = np.stack(
        [np.frombuffer(d, np.uint8) for d in rows]
    )
    zarr.open_group(url, mode="r+", zarr_format=3, path=S.RESIDUALS).attrs[
        residuals.LAYOUT_ATTR
    ] = 3


def test_a_layout_3_store_verifies_over_its_capacity(tmp_path: Path) -> None:
    """A store an older dpaudit wrote (layout 3: a block padded and digested to its capacity's
    last chunk) verifies intact, and a lost padding chunk of it is caught."""
    url = str(tmp_path / "old.zarr")
    planned = np.zeros((3, 3), np.int64)
    planned[1, 2] = 200_000  # four chunks of 65,536; its 12 items take the first
    template(url, planned)
    for s in range(3):
        for g in range(3):
            store.write_residual_block(url, s, g, make_block(4, 2, 1) if (s, g) == (1, 2) else None)
    as_layout_3(url, 1, 2)
    store.finalize(url)
    assert checksums.verify(url).problems == []
    off, _, _ = store.block_place(url, 1, 2)
    last = off // 65_536 + 3
    (Path(url) / S.RESIDUALS / "query_index" / "c" / str(last)).unlink()  # padding, as written
    assert checksums.verify(url).problems == [
        "residuals/query_index block (state=ST01, geolevel=County): checksum mismatch (missing or "
        "corrupt chunk)"
    ]


def test_a_block_write_and_read_open_the_residual_group_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each open of the group reads its metadata document (on an object store a HEAD and a GET):
    a block's write, its seal included, and each read open it once, not once per array they
    touch (17 opens per write before; benchmarks/README.md, "Requests to an object store")."""
    url = str(tmp_path / "s.zarr")
    template(url, np.full((3, 3), 12, np.int64))
    block = make_block(4, 2, 1)
    opened: list[str | None] = []
    real = zarr.open_group

    def counted(*args: object, **kwargs: object) -> zarr.Group:
        opened.append(kwargs.get("path"))  # type: ignore[arg-type]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(residual_blocks.zarr, "open_group", counted)
    assert store.write_residual_block(url, 1, 2, block) == 12
    assert opened == [S.RESIDUALS]  # one operation: its place, items, digests and seal
    opened.clear()
    got, _ = store.read_residuals(url, 1, 2)
    np.testing.assert_array_equal(got, block.residual)
    truth, _ = store.read_items(url, 1, 2)
    assert len(truth) == 12 and opened == [S.RESIDUALS, S.RESIDUALS]


def test_done_blocks_among_some_reads_their_marks_alone(tmp_path: Path) -> None:
    """A progress poll asks only for the blocks it has not yet seen done: the answer is the done
    blocks among them, read from their own marks (a corrupt mark of another block is not read)."""
    url = str(tmp_path / "s.zarr")
    template(url, np.full((3, 3), 12, np.int64))
    for s, g in ((0, 1), (1, 2), (2, 0)):
        store.write_residual_block(url, s, g, make_block(4, 2, 1))
    assert store.done_blocks(url) == {(0, 1), (1, 2), (2, 0)}
    assert store.done_blocks(url, among={(1, 2), (2, 1), (0, 0)}) == {(1, 2)}
    assert store.done_blocks(url, among=set()) == set()
    marks = Path(url) / S.RESIDUALS / S.BLOCK_SHA256 / "c"
    (marks / "0" / "1" / "0" / "0").write_bytes(b"not a chunk")  # (0, 1)'s mark
    with pytest.raises(RuntimeError):  # a whole read meets it
        store.done_blocks(url)
    assert store.done_blocks(url, among={(1, 2), (2, 0), (2, 2)}) == {(1, 2), (2, 0)}
