"""A run whose cluster loses every worker fails within ``cluster.lost_workers_grace_s``, and resumes.

Real processes throughout: `dask scheduler` and `dask worker` (its nannies and their workers) started
here, `dpaudit run --scheduler` as a subprocess reporting to the session's Prefect API.

- Every worker and nanny SIGKILLed midway: exit 1 with one `dpaudit: error:` line naming the lost
  workers and the grace period, so the cause is the watch for lost workers, not the run's far longer
  ``cluster.timeout_s`` (which is also a ceiling on the wait); the staged store is kept, no store
  published; once workers are back, the same command resumes it and writes arrays identical to an
  undisturbed run's.
- One worker (the only one) SIGKILLed and restarted by its nanny: no alarm, the run completes.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
import xarray as xr

from storage import schema as S
from storage import store
from tests._ceilings import PROCESS_CEILING_S
from tests.integration._processes import (
    Workers,
    dask_scheduler,
    dpaudit,
    end,
    marked_blocks,
    one_line,
    staging_dirs,
    wait_for,
    wait_workers,
)
from tests.integration._specs import tiny_spec, to_toml
from tests.integration.test_cli_run import FANOUT

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GRACE_S = 4.0
#: the run's own deadline: a run that ended by it would say so, and not name the lost workers
TIMEOUT_S = 900
#: how a run ended by its deadline says so (flows/runtime/deadline.py, Prefect's flow timeout)
TIMED_OUT = ("cluster.timeout_s", "exceeded timeout")


def spec_dict(grace: float) -> dict[str, Any]:
    return tiny_spec(
        states=3,
        fanout=FANOUT,
        simulation={"max_cells_per_query": 4},
        audit={"seed": 41},
        cluster={"lost_workers_grace_s": grace, "timeout_s": TIMEOUT_S, "tasks_per_worker": 0},
    )


def spec_text(grace: float) -> str:
    return to_toml(spec_dict(grace))


@pytest.fixture
def env(prefect_harness: None, tmp_path: Path) -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    return {
        **os.environ,
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "DPAUDIT_LOG_DIR": str(tmp_path / "logs"),
        # as docs/deploy.md asks of workers started by hand: a worker busy in an accounting task
        # on this 2-core machine is not dropped by Dask's default 30 s TCP timeout
        "DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP": "600s",
    }


@pytest.fixture
def scheduler(env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    with dask_scheduler(env, tmp_path) as address:
        yield address


@pytest.fixture
def workers(scheduler: str, env: dict[str, str], tmp_path: Path) -> Iterator[Workers]:
    w = Workers(scheduler, env, tmp_path)
    try:
        yield w
    finally:
        w.close()


def run_cmd(spec: Path, store_path: Path, address: str) -> list[str]:
    return [*dpaudit(), "run", str(spec), "--store", str(store_path), "--no-report",
            "--scheduler", address]  # fmt: skip


@contextmanager
def simulating(
    spec: Path, target: Path, scheduler: str, cwd: Path, env: dict[str, str]
) -> Iterator[subprocess.Popen[str]]:
    """``dpaudit run`` of ``spec`` into ``target`` on the cluster at ``scheduler`` (its output
    piped), once it has marked a simulated block beside ``target``; killed, if it still runs, and
    reaped when the block ends."""
    proc = subprocess.Popen(
        run_cmd(spec, target, scheduler), cwd=cwd, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(
            lambda: marked_blocks(target.parent) >= 1, PROCESS_CEILING_S, "simulated block", proc
        )
        yield proc
    finally:
        end(proc)


def test_a_run_whose_workers_all_die_fails_in_the_grace_period_and_resumes(
    tmp_path: Path, env: dict[str, str], scheduler: str, workers: Workers
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(GRACE_S))
    out = tmp_path / "out"
    out.mkdir()
    target = out / "a.zarr"
    first = workers.start(2)

    with simulating(spec, target, scheduler, tmp_path, env) as proc:
        workers.kill(first)  # every worker and nanny, midway
        killed_at = time.monotonic()
        _, stderr = proc.communicate(timeout=PROCESS_CEILING_S)
        took = time.monotonic() - killed_at
    assert proc.returncode == 1, stderr[-3000:]
    line = one_line(stderr)
    assert line.startswith(f"dpaudit: error: all 2 workers of the Dask cluster at {scheduler}"), (
        line
    )
    assert "connection closed: killed" in line, line
    assert f"lost_workers_grace_s = {GRACE_S:g} s" in line and "resume" in line, line
    # the cause, not the clock, decides: the line names the watch, not the deadline
    assert not any(t in line for t in TIMED_OUT), line
    assert took < TIMEOUT_S, f"the run ended {took:.0f} s after its workers died"
    assert not target.exists()  # nothing published ...
    kept = staging_dirs(out)
    assert len(kept) == 1 and repr(str(kept[0])) in line  # ... the staged store kept and named
    done_before = marked_blocks(out)
    assert done_before >= 1

    workers.start(2)  # the cluster is back: the same command resumes the staged store
    again = subprocess.run(
        run_cmd(spec, target, scheduler), cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=PROCESS_CEILING_S,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming the interrupted run" in again.stderr
    assert f"({done_before} resumed)" in again.stdout, again.stdout
    assert staging_dirs(out) == []

    calm = out / "calm.zarr"  # the same spec, undisturbed
    ok = subprocess.run(
        run_cmd(spec, calm, scheduler), cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=PROCESS_CEILING_S,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr[-3000:]
    for group in (S.RESIDUALS, S.EPL, S.ACCOUNTING):
        a = store.open_group(str(calm), group).load()
        b = store.open_group(str(target), group).load()
        xr.testing.assert_equal(a, b)


def test_a_worker_its_nanny_restarts_is_no_alarm(
    tmp_path: Path, env: dict[str, str], scheduler: str, workers: Workers
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(30.0))  # the nanny restarts its worker well within 30 s
    out = tmp_path / "out"
    out.mkdir()
    target = out / "a.zarr"
    workers.start(1)
    (pid,) = wait_workers(scheduler, 1)

    with simulating(spec, target, scheduler, tmp_path, env) as proc:
        assert proc.poll() is None, "the run ended before its worker was killed"
        psutil.Process(pid).kill()  # the only worker: the cluster has none until it is back
        _, stderr = proc.communicate(timeout=PROCESS_CEILING_S)
    assert proc.returncode == 0, stderr[-3000:]
    (restarted,) = wait_workers(scheduler, 1)
    assert restarted != pid  # the worker was replaced by its nanny meanwhile
    assert target.exists() and staging_dirs(out) == []
    assert f"{S.RESIDUALS}" in store.groups(str(target))


def test_a_served_run_whose_workers_all_die_fails_in_the_grace_period(
    tmp_path: Path, env: dict[str, str], scheduler: str, workers: Workers
) -> None:
    """`dpaudit serve` runs each scheduled run as ``flows.audit.scheduled.scheduled_audit`` with the spec's
    sections as parameters: here that flow, called so, on the external cluster whose every worker
    and nanny is killed midway. It ends Failed, naming the lost workers, within the grace period
    (its subflow's ``cluster.timeout_s`` is far longer), and publishes nothing."""
    from flows.audit.scheduled import scheduled_audit, spec_parameters
    from flows.spec import parse_spec

    out = tmp_path / "out"
    out.mkdir()
    target = out / "a.zarr"
    raw = spec_dict(GRACE_S)
    raw["cluster"].update(scheduler=scheduler, timeout_s=TIMEOUT_S)
    raw["output"] = {"store": str(target), "report": str(out / "a.html")}
    spec = parse_spec(raw, "the served spec")
    first = workers.start(2)
    killed: list[tuple[float, int]] = []

    def kill_midway() -> None:  # beside the flow, which runs in this thread
        deadline = time.monotonic() + PROCESS_CEILING_S
        while marked_blocks(out) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        blocks = marked_blocks(out)
        workers.kill(first)  # every worker and nanny
        killed.append((time.monotonic(), blocks))

    killer = threading.Thread(target=kill_midway, name="kill-workers", daemon=True)
    killer.start()
    state = scheduled_audit(**spec_parameters(spec), report=False, return_state=True)
    ended = time.monotonic()
    killer.join(60)
    assert killed, "the workers were not killed"
    killed_at, blocks = killed[0]
    assert blocks >= 1, "no block was simulated before the workers were killed"
    assert state.is_failed(), (state.type, state.message)
    message = str(state.message)
    assert f"all 2 workers of the Dask cluster at {scheduler}" in message, message
    assert f"lost_workers_grace_s = {GRACE_S:g} s" in message, message
    assert not any(t in message for t in TIMED_OUT), message
    took = ended - killed_at
    assert took < TIMEOUT_S, f"the served run ended {took:.0f} s after its workers died"
    assert not target.exists() and staging_dirs(out) == []  # nothing published, nothing left
