"""`s3://` targets against a real S3-compatible server on 127.0.0.1 (moto, server mode): dpaudit
replaces or deletes only a prefix holding a dpaudit store, and of several runs taking over a lock
left by a killed run at once, exactly one gets it."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from auditlib.exceptions import StoreError
from storage import staging, store, targets
from tests.integration._stores import finished_store
from tests.integration.test_store_races import CONTENDERS, CTX, _run
from tests.integration.test_store_s3 import S3, s3  # noqa: F401 - the moto server fixture

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def fs_of(s3: S3) -> Any:  # noqa: F811
    import s3fs

    return s3fs.S3FileSystem(endpoint_url=s3.endpoint, skip_instance_cache=True)


def objects(fs: Any, prefix: str) -> dict[str, bytes]:
    fs.invalidate_cache()
    return {k: fs.cat_file(k) for k in fs.find(prefix)}


def test_overwrite_refuses_a_prefix_that_is_not_a_store(s3: S3) -> None:  # noqa: F811
    import zarr

    fs = fs_of(s3)
    fs.pipe(f"{s3.bucket}/safety/victim/important.txt", b"precious\n")
    foreign = f"s3://{s3.bucket}/safety/foreign.zarr"
    zarr.open_group(foreign, mode="w", zarr_format=3, attributes={"owner": "someone"})
    fs.pipe(f"{s3.bucket}/safety/file.zarr", b"precious\n")  # an object at the store's own key
    before = objects(fs, f"{s3.bucket}/safety")
    for name in ("victim", "foreign.zarr", "file.zarr"):
        url = f"s3://{s3.bucket}/safety/{name}"
        for overwrite in (True, False):
            with pytest.raises(StoreError, match=r"dpaudit never replaces or deletes it") as exc:
                store.check_target(url, overwrite=overwrite)
            assert repr(url) in str(exc.value)
        with pytest.raises(StoreError, match="refusing to delete"):
            store.remove(url)
        store.discard(store.staging_path(url, "r1"), url)
    assert objects(fs, f"{s3.bucket}/safety") == before
    # neighbours of a name never count as its contents
    store.check_target(f"s3://{s3.bucket}/safety/vict", overwrite=False)
    # a dpaudit store may be replaced with --overwrite, and removed whole
    ours = f"s3://{s3.bucket}/safety/ours.zarr"
    finished_store(ours)
    with pytest.raises(StoreError, match="already exists; pass --overwrite"):
        store.check_target(ours, overwrite=False)
    store.check_target(ours, overwrite=True)
    store.remove(ours)
    assert not objects(fs, f"{s3.bucket}/safety/ours.zarr")


def test_publish_and_stale_stagings_touch_only_dpaudit_prefixes(s3: S3) -> None:  # noqa: F811
    fs = fs_of(s3)
    url = f"s3://{s3.bucket}/pub/a.zarr"
    odd = store.staging_path(url, "0123456789abcdef")
    fs.pipe(f"{odd.removeprefix('s3://')}/zarr.json", b"{}")  # staging-named, not dpaudit's
    old = store.staging_path(url, "fedcba9876543210")
    store.claim_staging(old, "fedcba9876543210")  # another spec's staging copy
    assert store.stale_stagings(url, "r1") == [old]
    staging = store.staging_path(url, "r1")
    finished_store(staging, "r1")
    fs.pipe(f"{s3.bucket}/pub/a.zarr/important.txt", b"precious\n")  # the target changed
    with pytest.raises(StoreError, match=r"refusing to replace .*finished run is kept in"):
        store.publish(staging, url)
    assert objects(fs, f"{s3.bucket}/pub/a.zarr") == {
        f"{s3.bucket}/pub/a.zarr/important.txt": b"precious\n"
    }
    assert store.is_complete(staging)
    fs.rm_file(f"{s3.bucket}/pub/a.zarr/important.txt")
    store.publish(staging, url)
    assert store.is_complete(url) and store.root_attrs(url)["run_id"] == "r1"
    assert not objects(fs, staging.removeprefix("s3://"))
    assert objects(fs, odd.removeprefix("s3://"))  # still there


def test_cli_run_with_overwrite_leaves_a_foreign_prefix_alone(
    s3: S3,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app
    from tests.integration.test_cli_run import SPEC

    fs = fs_of(s3)
    fs.pipe(f"{s3.bucket}/cli/victim/important.txt", b"precious\n")
    spec = tmp_path / "tiny.toml"
    spec.write_text(SPEC)
    url = f"s3://{s3.bucket}/cli/victim"
    monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", s3.endpoint)  # workers too, were a run started
    res = CliRunner().invoke(app, ["run", str(spec), "--store", url, "--overwrite", "--no-report"])
    assert res.exit_code == 2, res.output
    assert url in res.stderr and "not a dpaudit store" in res.stderr
    assert objects(fs, f"{s3.bucket}/cli") == {
        f"{s3.bucket}/cli/victim/important.txt": b"precious\n"
    }


def _take_over(
    url: str, endpoint: str, dead: int, marker: str, start: Any, go: Any, rounds: int, out: Any
) -> None:
    counts: Counter[str] = Counter()
    jitter = random.Random(os.getpid())
    for _ in range(rounds):
        start.wait()
        # released together, spread over 30 ms: each one's read, delete and create of the lock
        # object (a few ms each) overlap the others'
        release = go.value + jitter.uniform(0.0, 0.03)
        while time.monotonic() < release:
            pass
        try:
            with store.exclusive(url):
                try:
                    fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    counts["overlap"] += 1
                    continue
                counts["held"] += 1
                time.sleep(0.3)
                os.close(fd)
                os.unlink(marker)
        except StoreError:
            counts["refused"] += 1
        except Exception as exc:
            counts[f"error {type(exc).__name__}: {exc}"] += 1
    out.put(dict(counts))


def test_runs_taking_over_a_killed_runs_lock_at_once_get_it_once(
    s3: S3,  # noqa: F811
    tmp_path: Path,
) -> None:
    url = f"s3://{s3.bucket}/takeover/a.zarr"
    lock = f"{s3.bucket}/takeover/a.zarr.lock"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    stale = json.dumps({"host": socket.gethostname(), "pid": int(dead.stdout)}).encode()
    go = CTX.Value("d", 0.0)

    def leave_stale_lock() -> None:  # a killed run's lock, before each round
        fs_of(s3).pipe_file(lock, stale)
        go.value = time.monotonic() + 0.05

    rounds = 6
    start = CTX.Barrier(CONTENDERS, action=leave_stale_lock)
    marker = str(tmp_path / "holder")
    # CONTENDERS forked contenders (test_store_races's, as many as the barrier's parties)
    total = _run(_take_over, (url, s3.endpoint, int(dead.stdout), marker, start, go, rounds))
    assert total["overlap"] == 0, total
    assert set(total) <= {"held", "refused"}, total
    assert total["held"] >= rounds and total["held"] + total["refused"] == rounds * CONTENDERS
    assert not fs_of(s3).exists(lock)


def test_a_publish_cut_short_leaves_a_recognisable_unfinished_store(
    s3: S3,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"s3://{s3.bucket}/cut/a.zarr"
    finished_store(url, "r0")
    staging = store.staging_path(url, "r1")
    finished_store(staging, "r1")
    fs, _ = targets.fs_path(url)

    def cut(*args: Any, **kwargs: Any) -> None:
        raise OSError("connection lost")

    monkeypatch.setattr(fs, "copy", cut)  # the cached instance publish uses
    with pytest.raises(OSError, match="connection lost"):
        store.publish(staging, url)
    monkeypatch.undo()
    # the old store is gone, the new one not yet there: an unfinished dpaudit store, which a run
    # with --overwrite replaces (without it, prepare_remote refuses it)
    assert store.is_dpaudit_store(url) and not store.is_complete(url)
    store.check_target(url, overwrite=True)
    with pytest.raises(StoreError, match="holds an unfinished store; pass --overwrite"):
        store.prepare_remote(url, "r1", overwrite=False)
    store.publish(staging, url)
    assert store.is_complete(url) and store.root_attrs(url)["run_id"] == "r1"


def test_the_remains_of_a_removed_staging_prefix_are_cleared_and_nothing_else(
    s3: S3,  # noqa: F811
) -> None:
    fs = fs_of(s3)
    url = f"s3://{s3.bucket}/remains/a.zarr"
    place = store.staging_path(url, "r1")
    key = place.removeprefix("s3://")
    for chunk in ("late/c/0/0", "late/c/0/1", "residuals/truth/c/3"):  # what a late write makes
        fs.pipe(f"{key}/{chunk}", b"\x00" * 8)
    other = store.staging_path(url, "r2")
    fs.pipe(f"{other.removeprefix('s3://')}/late/c/0/0", b"\x00" * 8)
    assert store.stale_stagings(url, "r1") == [other]  # another spec's remains: stale
    fs.pipe(f"{key}/notes.txt", b"mine\n")
    before = objects(fs, key)
    with pytest.raises(StoreError, match="move it away and run again"):
        staging.make_room(place)
    store.discard(place, url)
    assert objects(fs, key) == before  # not remains: kept
    fs.rm_file(f"{key}/notes.txt")
    assert staging.make_room(place) is True and not objects(fs, key)
    store.discard(other, url)  # a failed run's discard clears them too
    assert not objects(fs, other.removeprefix("s3://"))
