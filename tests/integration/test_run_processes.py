"""`dpaudit run` as processes: what it starts ends with it, and its console stays its own.

- ``kill -9`` of the run: no process it started (the embedded API server, Dask's workers) survives,
  and nothing listens on the server's port.
- A job stopped with SIGTERM to its process group (a batch scheduler's stop): exit 1, one line
  naming the signal, the staging copy kept and resumed by the same command.
- A run that fails midway (its staging store broken under it): exit 1 and one line on the console;
  Prefect's and Dask's tracebacks are in the run's log file; no exception pickle is left under
  ``$PREFECT_HOME/storage``.
- ``--scheduler`` at an HTTP server (which waits for a request: Dask's handshake hung for ever):
  exit 2 and one line within ``cluster.connect_timeout`` (plus the embedded API's start). A closed
  port and a bad cluster-class kwarg: tests/unit/test_runtime_scheduler.py and
  tests/unit/test_runtime_cluster_class.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests._ceilings import PROCESS_CEILING_S
from tests.integration._processes import (
    alive,
    dpaudit,
    end,
    kill_group,
    marked_blocks,
    one_line,
    own_environment,
    port_open,
    resume,
    serving_http,
    staging_dirs,
    wait_for,
)
from tests.integration._specs import tiny_spec, to_toml
from tests.integration.test_cli_run import FANOUT

pytestmark = pytest.mark.integration

# three states, one worker: a run long enough to be caught simulating
SPEC = to_toml(
    tiny_spec(
        states=3, fanout=FANOUT, simulation={"max_cells_per_query": 4}, cluster={"n_workers": 1}
    )
)


@pytest.fixture(scope="module")
def prefect_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Prefect home for the runs of this module: its database is created once."""
    return tmp_path_factory.mktemp("prefect-home")


@pytest.fixture
def run_env(tmp_path: Path, prefect_home: Path) -> dict[str, str]:
    env = own_environment()
    env["PREFECT_HOME"] = str(prefect_home)
    env["DPAUDIT_LOG_DIR"] = str(tmp_path / "logs")
    return env


def listening_ports(procs: list[psutil.Process]) -> set[int]:
    ports = set()
    for p in procs:
        try:
            conns = p.net_connections(kind="inet")
        except psutil.Error:
            continue
        ports |= {c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN}
    return ports


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(SPEC)
    (tmp_path / "out").mkdir()
    return p


@pytest.mark.slow
def test_kill_9_of_a_run_leaves_no_process_behind(
    tmp_path: Path, spec_file: Path, run_env: dict[str, str]
) -> None:
    out = tmp_path / "out"
    cmd = [*dpaudit(), "run", str(spec_file), "--store", str(out / "a.zarr"), "--no-report"]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=run_env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    run = psutil.Process(proc.pid)
    tree: list[psutil.Process] = []
    try:
        # the embedded server listens and a block is done: the workers are simulating
        wait_for(lambda: marked_blocks(out) >= 1, PROCESS_CEILING_S, "simulated block", proc)
        tree = run.children(recursive=True)
        server = [p for p in tree if "uvicorn" in " ".join(p.cmdline())]
        assert len(server) == 1, [p.cmdline() for p in tree]
        ports = listening_ports(server)
        assert ports, "the embedded server listens on no port"
        assert len(tree) >= 2, "no Dask worker process"
        os.kill(proc.pid, signal.SIGKILL)  # the run only: what it started must end by itself
        proc.wait(30)
        deadline = (
            time.monotonic() + PROCESS_CEILING_S
        )  # a ceiling: each ends by itself, soon on a calm machine

        def ended() -> bool:
            return not any(alive(p.pid) for p in tree) and not any(map(port_open, ports))

        while not ended() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [(p.pid, p.cmdline()) for p in tree if alive(p.pid)]
        assert not left, f"processes of the killed run are still running: {left}"
        assert not [port for port in ports if port_open(port)]
    finally:
        end(proc)
        for p in tree:
            if alive(p.pid):
                p.kill()


def _start_run(
    tmp_path: Path, spec_file: Path, run_env: dict[str, str], *, own_group: bool = False
) -> tuple[Path, list[str], subprocess.Popen[str]]:
    """``dpaudit run`` of the spec into ``out/a.zarr``, started with its output piped (in a
    process group of its own, as a batch job, if ``own_group``): the store's directory, the
    command and its process."""
    out = tmp_path / "out"
    cmd = [*dpaudit(), "run", str(spec_file), "--store", str(out / "a.zarr"), "--no-report"]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=own_group,
    )  # fmt: skip
    return out, cmd, proc


@pytest.mark.slow
def test_a_run_stopped_under_it_keeps_its_finished_blocks_and_resumes(
    tmp_path: Path, spec_file: Path, run_env: dict[str, str]
) -> None:
    # a job's processes stopped under the run (here its API server, as a scheduler's SIGTERM to
    # the job does): the run fails, but the blocks it finished are not thrown away
    out, cmd, proc = _start_run(tmp_path, spec_file, run_env)
    try:
        wait_for(lambda: marked_blocks(out) >= 1, PROCESS_CEILING_S, "simulated block", proc)
        tree = psutil.Process(proc.pid).children(recursive=True)
        (server,) = [p for p in tree if "uvicorn" in " ".join(p.cmdline())]
        server.kill()
        _, stderr = proc.communicate(timeout=PROCESS_CEILING_S)
    finally:
        end(proc)
    assert proc.returncode == 1, stderr[-3000:]
    line = one_line(stderr)
    assert line.startswith("dpaudit: error: the run failed: "), line
    assert "finished block(s): run the same command again to resume it" in line, line
    (staged,) = staging_dirs(out)
    assert repr(str(staged)) in line
    run_id = staged.name.rsplit("-", 1)[1]
    resume(cmd, run_env, tmp_path, run_id, PROCESS_CEILING_S)  # says it resumes that run
    assert (out / "a.zarr").is_dir() and not staging_dirs(out)


@pytest.mark.slow
def test_a_job_stopped_with_sigterm_says_so_keeps_its_copy_and_resumes(
    tmp_path: Path, spec_file: Path, run_env: dict[str, str]
) -> None:
    # a batch scheduler's stop (Slurm's time limit or scancel, a pod's eviction): SIGTERM to the
    # job's whole process group — the run, its API server and its workers at once
    out, cmd, proc = _start_run(tmp_path, spec_file, run_env, own_group=True)
    try:
        wait_for(lambda: marked_blocks(out) >= 1, PROCESS_CEILING_S, "simulated block", proc)
        os.killpg(proc.pid, signal.SIGTERM)
        _, stderr = proc.communicate(timeout=PROCESS_CEILING_S)
    finally:
        kill_group(proc)
    assert proc.returncode == 1, stderr[-3000:]
    line = one_line(stderr)  # the signal named, not the refused connection it caused
    assert line.startswith("dpaudit: error: stopped by SIGTERM; finished blocks are kept in "), line
    (staged,) = staging_dirs(out)
    assert repr(str(staged)) in line and line.endswith("run the same command again to resume")
    run_id = staged.name.rsplit("-", 1)[1]
    resume(cmd, run_env, tmp_path, run_id, PROCESS_CEILING_S)
    assert (out / "a.zarr").is_dir() and not staging_dirs(out)


def break_store(c: Path) -> None:
    """Replace the chunk directory ``c`` of a staging array by a file: every later write fails."""
    while not c.is_file():
        shutil.rmtree(c, ignore_errors=True)
        try:
            c.touch(exist_ok=False)
        except (FileExistsError, IsADirectoryError):
            continue


@pytest.mark.slow
def test_a_failing_run_keeps_the_console_to_one_line(
    tmp_path: Path, spec_file: Path, run_env: dict[str, str], prefect_home: Path
) -> None:
    out, _, proc = _start_run(tmp_path, spec_file, run_env)
    try:
        chunks: list[Path] = []

        def written() -> bool:
            chunks[:] = [s / "residuals/residual/c" for s in staging_dirs(out)]
            return bool(chunks) and chunks[0].is_dir()

        wait_for(written, PROCESS_CEILING_S, "residual chunk", proc)
        break_store(chunks[0])
        _, stderr = proc.communicate(timeout=PROCESS_CEILING_S)
    finally:
        end(proc)
    assert proc.returncode == 1, stderr[-3000:]
    assert one_line(stderr).startswith("dpaudit: error: the run failed: NotADirectoryError")
    # what Prefect and Dask had to say is in the run's log file
    logs = list((tmp_path / "logs").glob("dpaudit-*.log"))
    assert len(logs) == 1, logs
    text = logs[0].read_text()
    assert "Traceback (most recent call last)" in text and "NotADirectoryError" in text
    assert "Task run" in text  # Prefect's task-run failure, logged in the worker process
    # no exception pickles in Prefect's home, and the run's private directory is gone
    storage = prefect_home / "storage"
    assert not storage.exists() or not any(storage.iterdir())
    assert not list((tmp_path / "logs").glob(".dpaudit-*"))


@pytest.fixture
def http_server() -> Iterator[str]:
    with serving_http() as address:
        yield address


def test_an_http_server_as_scheduler_is_refused_in_one_line(
    tmp_path: Path, http_server: str, run_env: dict[str, str]
) -> None:
    address = http_server
    spec = tmp_path / "spec.toml"
    spec.write_text(to_toml(tiny_spec(cluster={"connect_timeout": 2})))
    (tmp_path / "out").mkdir()
    cmd = [*dpaudit(), "run", str(spec), "--store", "out/a.zarr", "--no-report"]
    # refused after the embedded API's start (the scheduler is checked as the cluster starts)
    # plus the 2 s timeout; Dask's own connect waited for ever
    done = subprocess.run(
        [*cmd, "--scheduler", address],
        cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=PROCESS_CEILING_S,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    line = one_line(done.stderr)
    assert line.startswith("dpaudit: error: ") and repr(address) in line
    assert list((tmp_path / "out").iterdir()) == []
