"""The local store lock under real contention: many processes released at one instant, each trying
``storage.store.exclusive``; a holder proves it is alone by creating a marker file with O_EXCL
(two holders at once: the second finds the marker). A holder killed with SIGKILL frees the lock."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from auditlib.exceptions import StoreError
from storage import store
from tests._ceilings import PROCESS_CEILING_S

pytestmark = pytest.mark.integration

CONTENDERS = 16
CTX = mp.get_context("fork")  # the contenders start in a few ms, the store module already imported


def _pause_identity_writes(seconds: float, counts: Counter[str]) -> None:
    """Slow down this process's write of its identity into a lock file (test hook: the window
    between creating the lock file and recording who holds it, made wide)."""
    real = os.write

    def slow(fd: int, data: Any) -> int:
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            name = ""
        if name.endswith(".lock"):
            counts["paused"] += 1
            time.sleep(seconds)
        return real(fd, data)

    os.write = slow  # type: ignore[assignment]


def _hold(url: str, marker: Path, hold_s: float, counts: Counter[str]) -> None:
    try:
        with store.exclusive(url):
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                counts["overlap"] += 1  # another process holds the lock right now
                return
            counts["held"] += 1
            time.sleep(hold_s)
            os.close(fd)
            os.unlink(marker)
    except StoreError:
        counts["refused"] += 1
    except Exception as exc:  # anything else is a failure of the lock too
        counts[f"error {type(exc).__name__}: {exc}"] += 1


def _contend(
    url: str, start: Any, go: Any, rounds: int, hold_s: float, pause_s: float, out: Any
) -> None:
    counts: Counter[str] = Counter()
    if pause_s:
        _pause_identity_writes(pause_s, counts)
    marker = Path(url).with_name("holder")
    for _ in range(rounds):
        start.wait()  # all here; one of them set the start time 5 ms ahead
        while time.monotonic() < go.value:
            pass  # every contender released at the same instant, all of them running
        _hold(url, marker, hold_s, counts)
    out.put(dict(counts))


def _released_together(rounds: int) -> tuple[Any, Any]:
    go = CTX.Value("d", 0.0)

    def set_go() -> None:
        go.value = time.monotonic() + 0.005

    return CTX.Barrier(CONTENDERS, action=set_go), go


def _churn(url: str, start: Any, seconds: float, out: Any) -> None:
    counts: Counter[str] = Counter()
    marker = Path(url).with_name("holder")
    start.wait()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        _hold(url, marker, 0.0, counts)
    out.put(dict(counts))


def _child(target: Any, *args: Any) -> None:
    """Run ``target`` in a forked contender, then leave without the exit handlers it inherited
    (a test process that already ran flows has Prefect's and Dask's)."""
    out = args[-1]
    code = 0
    try:
        target(*args)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    out.close()
    out.join_thread()
    os._exit(code)


def _run(target: Any, args: tuple[Any, ...]) -> Counter[str]:
    out = CTX.Queue()
    procs = [CTX.Process(target=_child, args=(target, *args, out)) for _ in range(CONTENDERS)]
    for p in procs:
        p.start()
    total: Counter[str] = Counter()
    for _ in procs:
        total.update(out.get(timeout=PROCESS_CEILING_S))
    for p in procs:
        p.join(timeout=PROCESS_CEILING_S)
        assert p.exitcode == 0
    return total


@pytest.mark.slow
def test_contenders_released_together_never_hold_the_lock_together(tmp_path: Path) -> None:
    url = str(tmp_path / "s.zarr")
    rounds = 300
    total = _run(_contend, (url, *_released_together(rounds), rounds, 0.005, 0.0))
    assert total["overlap"] == 0, total
    assert set(total) <= {"held", "refused"}, total
    assert total["held"] >= rounds  # each round someone got it (one, or one after another)
    assert total["held"] + total["refused"] == rounds * CONTENDERS
    assert not store.lock_path(url).exists()  # released: the lock file is gone


def test_no_window_between_creating_the_lock_file_and_recording_its_holder(
    tmp_path: Path,
) -> None:
    url = str(tmp_path / "s.zarr")
    rounds = 5
    total = _run(_contend, (url, *_released_together(rounds), rounds, 0.06, 0.05))
    assert total["paused"] >= rounds  # the hook ran: every holder paused 50 ms before writing
    assert total["overlap"] == 0, total
    assert total["held"] + total["refused"] == rounds * CONTENDERS, total


def test_lock_and_release_in_a_tight_loop_never_doubles_up(tmp_path: Path) -> None:
    """Release unlinks the lock file; a contender that locked the unlinked file must notice and
    start again on the new one, never hold it beside the new file's holder."""
    url = str(tmp_path / "s.zarr")
    total = _run(_churn, (url, CTX.Barrier(CONTENDERS), 1.5))
    assert total["overlap"] == 0, total
    assert set(total) <= {"held", "refused"}, total
    assert total["held"] >= 50, total


def test_a_lock_held_by_a_killed_run_is_taken_over(tmp_path: Path) -> None:
    url = str(tmp_path / "s.zarr")
    code = (
        "import sys, time\nfrom storage import store\n"
        "with store.exclusive(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(120)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, url],
        cwd=Path(__file__).parents[2],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(
            StoreError, match=rf"another dpaudit run \(pid {holder.pid}\) is writing .* \(host "
        ):
            with store.exclusive(url):
                pass
        assert json.loads(store.lock_path(url).read_text())["pid"] == holder.pid  # untouched
    finally:
        holder.kill()  # SIGKILL: no clean-up runs, the lock file stays behind
        holder.wait()
    assert store.lock_path(url).exists()
    with store.exclusive(url):
        held = json.loads(store.lock_path(url).read_text())
        assert held["pid"] == os.getpid() and set(held) == {"pid", "host", "started_utc"}
    assert not store.lock_path(url).exists()
