"""`dpaudit run` as a user runs it: embedded Prefect API, local Dask cluster, store, report."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from storage import store
from tests._ceilings import PROCESS_CEILING_S
from tests.integration._processes import dpaudit, wait_workers
from tests.integration._specs import tiny_spec, to_toml

pytestmark = pytest.mark.integration

# two states of a bushier hierarchy than the shared tiny one; queries of up to 4 cells
FANOUT = {"County": 2, "Tract_Subset": 2, "Block_Group": 2, "Block": 3}
SPEC = to_toml(tiny_spec(states=2, fanout=FANOUT, simulation={"max_cells_per_query": 4}))


def test_run_writes_store_and_report_then_refuses_to_clobber(tmp_path: Path) -> None:
    spec = tmp_path / "tiny.toml"
    spec.write_text(SPEC)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    cmd = [*dpaudit(), "run", str(spec), "--store", "out/a.zarr", "--report", "out/r.html"]
    done = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PROCESS_CEILING_S
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "store:  out/a.zarr" in done.stdout
    html = (tmp_path / "out" / "r.html").read_text()
    assert "data:image/png;base64," in html
    # only the finished store is left: no staging directories beside it
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.zarr", "r.html"]
    code = (
        "import xarray as xr; ds = xr.open_zarr('out/a.zarr', group='accounting'); "
        "print(round(float(ds.eps_exact_upper.sel(geolevel='State', delta=1e-10)), 4))"
    )
    read = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], cwd=tmp_path, capture_output=True, text=True
    )
    assert read.stdout.strip() == "9.6009", read.stderr  # REFERENCE.md: State 9.600900 @1e-10
    # a second run must not replace the results without --overwrite
    stamp = (tmp_path / "out" / "a.zarr" / "zarr.json").stat().st_mtime_ns
    again = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PROCESS_CEILING_S
    )
    assert again.returncode == 2
    assert "already exists; pass --overwrite" in again.stderr
    assert (tmp_path / "out" / "a.zarr" / "zarr.json").stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_run_on_an_external_scheduler_with_a_relative_store(tmp_path: Path) -> None:
    """`--scheduler ADDRESS`: a separately started `dask scheduler` + `dask worker`, whose working
    directory is not the user's, must write the same store the user named (relative path)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    addr = f"tcp://127.0.0.1:{port}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bindir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    # as docs/deploy.md asks of a cluster started by hand: a worker busy in an accounting task on
    # a loaded machine is not dropped by Dask's default 30 s TCP timeout
    env["DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP"] = "600s"
    sched = subprocess.Popen(
        [str(bindir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
         "--no-dashboard"],
        cwd=elsewhere, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    worker = subprocess.Popen(
        [str(bindir / "dask"), "worker", addr, "--nthreads", "1", "--nworkers", "1",
         "--no-dashboard"],
        cwd=elsewhere, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_workers(addr, 1)  # the scheduler is up and the worker has joined it
        spec = tmp_path / "tiny.toml"
        spec.write_text(SPEC)
        cmd = [
            *dpaudit(),
            "run",
            str(spec),
            "--store",
            "a.zarr",
            "--no-report",
            "--scheduler",
            addr,
        ]
        done = subprocess.run(
            cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PROCESS_CEILING_S
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "warning" not in done.stderr  # the cluster's TCP timeout is not Dask's 30 s
        assert (tmp_path / "a.zarr" / "zarr.json").exists()
        assert store.root_attrs(str(tmp_path / "a.zarr"))["n_workers"] == 1  # counted, not assumed
        assert not any(elsewhere.iterdir())  # nothing landed in the workers' directory
    finally:
        worker.terminate()
        sched.terminate()
        worker.wait(30)
        sched.wait(30)


@pytest.fixture
def api_env(prefect_harness: None, tmp_path: Path) -> dict[str, str]:
    """The environment of a `dpaudit` process reporting to the session's Prefect API (no embedded
    server to start), its log files in the test's directory."""
    from prefect.settings import PREFECT_API_URL

    return {
        **os.environ,
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "DPAUDIT_LOG_DIR": str(tmp_path / "logs"),
    }


#: what Prefect logs when a flow outlives its timeout: its timeout line, or (the timeout landing
#: while a result is serialised) the cancellation it causes, or (its alarm lost in a finalizer)
#: the failure of the flow's own deadline (flows/runtime/deadline.py)
PREFECT_TIMEOUT = re.compile(
    r"exceeded timeout of 1\.0 second|Flow run .* CancelledError|outlived its timeout of 1 s"
)
#: a run that outlives its one-second cluster.timeout_s: seconds of work on any machine, the
#: accounting cache cold (a delta no other test asks for); a warm cache let the tiny flow end
#: inside its one second on a busy machine
OUTLIVES_ITS_TIMEOUT = to_toml(
    tiny_spec(
        audit={"replicates": 40},
        accounting={"composed": True, "deltas": [3.25e-11]},
        cluster={"timeout_s": 1, "n_workers": 1},
    )
)


@pytest.mark.slow
def test_a_run_failing_midway_prints_one_line_and_keeps_the_trace_in_a_log(
    api_env: dict[str, str], tmp_path: Path
) -> None:
    """A real failure midway (the flow outlives cluster.timeout_s): exit 1, one line naming the log;
    what Prefect printed and the trace are in the log, not on the terminal; no store left."""
    work = tmp_path / "work"
    work.mkdir()
    spec = work / "slow.toml"
    spec.write_text(OUTLIVES_ITS_TIMEOUT)
    cmd = [*dpaudit(), "run", str(spec), "--store", "a.zarr", "--no-report"]
    done = subprocess.run(
        cmd, cwd=work, env=api_env, capture_output=True, text=True, timeout=PROCESS_CEILING_S
    )
    assert done.returncode == 1, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("dpaudit: error: the run failed: ") and "Traceback" not in lines[0]
    (log,) = (tmp_path / "logs").iterdir()
    assert lines[0].endswith(f"the full log is in {log}")
    text = log.read_text()
    assert PREFECT_TIMEOUT.search(text)  # Prefect's own line, kept off the terminal
    assert "Traceback (most recent call last)" in text
    assert sorted(p.name for p in work.iterdir()) == ["slow.toml"]  # no store, no staging copy


@pytest.mark.slow
def test_debug_keeps_a_failing_run_on_the_terminal(api_env: dict[str, str], tmp_path: Path) -> None:
    """``dpaudit --debug run``: what Prefect prints and the trace stay on the terminal, then the
    one line; no log file."""
    spec = tmp_path / "slow.toml"
    spec.write_text(OUTLIVES_ITS_TIMEOUT)
    cmd = [*dpaudit(), "--debug", "run", str(spec), "--store", "a.zarr", "--no-report"]
    done = subprocess.run(
        cmd, cwd=tmp_path, env=api_env, capture_output=True, text=True, timeout=PROCESS_CEILING_S
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert PREFECT_TIMEOUT.search(done.stderr)
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("dpaudit: error: the run failed: ")
    assert not (tmp_path / "logs").exists()


@pytest.mark.slow
def test_a_cluster_class_that_does_not_start_is_one_line(
    api_env: dict[str, str], tmp_path: Path
) -> None:
    """LocalCluster passes unknown kwargs to its workers, which fail to start and print Dask's
    tracebacks: the terminal gets the one line only, exit 2, and nothing is left behind."""
    spec = tmp_path / "kw.toml"
    cluster = {"class": "distributed.LocalCluster", "kwargs": {"n_workers": 1, "bogus_arg": 3}}
    spec.write_text(to_toml(tiny_spec(cluster=cluster)))
    cmd = [*dpaudit(), "run", str(spec), "--store", "a.zarr", "--no-report"]
    done = subprocess.run(
        cmd, cwd=tmp_path, env=api_env, capture_output=True, text=True, timeout=PROCESS_CEILING_S
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr
    assert "Traceback" not in done.stderr and "bogus_arg" in done.stderr
    assert done.stderr.startswith("dpaudit: error: cluster.class = 'distributed.LocalCluster'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kw.toml", "logs"]
    assert not any((tmp_path / "logs").iterdir())  # bad input keeps no log
