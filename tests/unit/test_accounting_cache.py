"""Reuse of accounting work: the in-process caches and the persistent result cache."""

from __future__ import annotations

import multiprocessing as mp
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from auditlib.accounting import _memo
from auditlib.allocations import load_allocation
from auditlib.summaries import account_components
from flows.audit.account_cache import account_cached, account_key
from storage import result_cache

# two levels of exact rational variances (exact-lattice accounting, a fraction of a second)
ALLOCATION = """geolevel,query,cells,mechanism,rho,sigma2,scale,sensitivity,neighbours
State,total,1,discrete_gaussian,,3,,,add_remove
State,sex,2,discrete_gaussian,,7/2,,,add_remove
County,total,1,discrete_gaussian,,5,,,add_remove
County,sex,2,discrete_gaussian,,11/3,,,add_remove
"""
DELTAS = [1e-5, 1e-10]
EPS = np.linspace(0.0, 3.0, 25)
ALPHA = np.linspace(0.0, 1.0, 11)


@pytest.fixture()
def alloc_path(tmp_path: Path) -> str:
    p = tmp_path / "alloc.csv"
    p.write_text(ALLOCATION, encoding="utf-8")
    return str(p)


@pytest.fixture(autouse=True)
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(result_cache.CACHE_DIR_ENV, str(root))
    _memo.clear()
    return root


def components(path: str, level: str | None) -> list[tuple[Fraction, int]]:
    return load_allocation(path).components("add_remove", "persons", "US", level)


def run(path: str, level: str | None) -> dict:
    return account_components(components(path, level), DELTAS, EPS, ALPHA, 1e-10)


def assert_identical(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        assert x.dtype == y.dtype and x.shape == y.shape, k
        assert x.tobytes() == y.tobytes(), k  # bit for bit


def cached_run(path: str, level: str | None, use_cache: bool = True) -> dict:
    return account_cached(
        path,
        "add_remove",
        "persons",
        "US",
        level,
        components(path, level),
        DELTAS,
        EPS,
        ALPHA,
        1e-10,
        use_cache=use_cache,
    )


def test_in_process_reuse_is_bit_identical(alloc_path: str) -> None:
    with _memo.caching(False):
        plain = {g: run(alloc_path, g) for g in (None, "State", "County")}
    assert _memo.stats["hits"] == 0
    composed = run(alloc_path, None)
    assert composed["method"] == "exact-lattice"
    # the calibration's first step (c = 1) is the accounted composition, and the levels share the
    # composed run's per-variance measures
    hits = _memo.stats["hits"]
    assert hits >= 1
    reused = {g: run(alloc_path, g) for g in (None, "State", "County")}
    assert _memo.stats["hits"] > hits
    for g in plain:
        assert_identical(plain[g], reused[g])
    assert_identical(plain[None], composed)


def test_cached_measures_are_read_only(alloc_path: str) -> None:
    from auditlib.accounting.discrete_gaussian_pld import group_measure

    m = group_measure(Fraction(7, 2), 3)
    assert group_measure(Fraction(7, 2), 3) is m
    with pytest.raises(ValueError):
        m.values[0] = 1.0


def test_persistent_hit_is_bit_identical(alloc_path: str, cache_root: Path) -> None:
    with _memo.caching(False):
        plain = run(alloc_path, None)
    first = cached_run(alloc_path, None)
    entries = list((cache_root / "accounting").glob("*.npz"))
    assert len(entries) == 1
    stamp = entries[0].stat().st_mtime_ns
    second = cached_run(alloc_path, None)
    assert entries[0].stat().st_mtime_ns == stamp  # read, not rewritten
    assert_identical(plain, first)
    assert_identical(plain, second)
    assert not list(cache_root.rglob("*.tmp"))


def test_switched_off_neither_reads_nor_writes(alloc_path: str, cache_root: Path) -> None:
    cached_run(alloc_path, "State", use_cache=False)
    assert not cache_root.exists()


def test_corrupt_entry_is_detected_and_recomputed(alloc_path: str, cache_root: Path) -> None:
    good = cached_run(alloc_path, "State")
    (path,) = (cache_root / "accounting").glob("*.npz")
    key = path.stem
    # 1. a flipped byte inside the stored arrays, the file still a readable npz
    with np.load(path) as z:
        parts = {n: z[n] for n in z.files}
    parts["a_eps_exact_upper"] = parts["a_eps_exact_upper"] * 0.5  # a smaller, wrong epsilon
    np.savez(path, **parts)
    assert result_cache.load(key) is None
    again = cached_run(alloc_path, "State")
    assert_identical(good, again)
    assert result_cache.load(key) is not None  # rewritten intact
    # 2. a truncated file
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert result_cache.load(key) is None
    assert_identical(good, cached_run(alloc_path, "State"))
    # 3. an intact entry copied under another key is not trusted
    other = path.with_name("0" * 64 + ".npz")
    other.write_bytes(path.read_bytes())
    assert result_cache.load("0" * 64) is None


def test_changed_allocation_file_changes_the_key(alloc_path: str) -> None:
    def key() -> str:
        return account_key(
            alloc_path,
            "add_remove",
            "persons",
            "US",
            "State",
            components(alloc_path, "State"),
            DELTAS,
            EPS,
            ALPHA,
            1e-10,
        )

    before = key()
    assert key() == before
    # a County change leaves the State components as they were: only the file's bytes differ
    Path(alloc_path).write_text(
        ALLOCATION.replace(
            "County,total,1,discrete_gaussian,,5", "County,total,1,discrete_gaussian,,6"
        ),
        encoding="utf-8",
    )
    assert key() != before


SIZES = {1: 400_000, 2: 20_000}  # writers of different lengths: interleaved bytes cannot pass


def _writer(root: str, key: str, seed: int, n: int) -> None:
    import os

    os.environ[result_cache.CACHE_DIR_ENV] = root
    size = SIZES[seed]
    result = {"curve": np.random.default_rng(seed).random(size), "n": size, "method": "exact"}
    for _ in range(n):
        result_cache.save(key, result)


def test_concurrent_writers_leave_a_valid_entry(cache_root: Path) -> None:
    key = "ab" * 32
    ctx = mp.get_context("spawn")  # not fork: this process may run threads (Dask, Prefect)
    procs = [ctx.Process(target=_writer, args=(str(cache_root), key, s, 25)) for s in SIZES]
    for p in procs:
        p.start()
    seen = 0
    while any(p.is_alive() for p in procs):  # a reader meanwhile sees a whole entry or none yet
        hit = result_cache.load(key)
        if hit is not None:
            seen += 1
            assert hit["curve"].shape == (hit["n"],)
        elif seen:
            raise AssertionError("an entry once written became unreadable while rewritten")
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    hit = result_cache.load(key)
    assert hit is not None
    expected = np.random.default_rng(next(s for s in SIZES if SIZES[s] == hit["n"])).random(
        hit["n"]
    )
    assert np.array_equal(hit["curve"], expected)
    assert not list(cache_root.rglob("*.tmp"))


def test_the_audit_account_task_reuses_its_stored_result(alloc_path: str, cache_root: Path) -> None:
    from flows.audit import tasks

    def task(use_cache: bool) -> dict:
        return tasks.account.fn(
            alloc_path,
            "add_remove",
            "persons",
            "US",
            None,
            DELTAS,
            EPS,
            ALPHA,
            1e-10,
            label="composed",
            use_cache=use_cache,
        )

    first = task(True)
    (path,) = (cache_root / "accounting").glob("*.npz")
    stamp = path.stat().st_mtime_ns
    second = task(True)
    assert path.stat().st_mtime_ns == stamp
    with _memo.caching(False):
        plain = task(False)
    assert second["geolevel"] == plain["geolevel"] == "composed"
    assert_identical(plain, first)
    assert_identical(plain, second)
    assert len(list((cache_root / "accounting").glob("*.npz"))) == 1
