"""Real processes for the integration tests: the `dpaudit` command, a `dask scheduler` and `dask
worker` processes started and killed here, waiting on a running command, a command run in its own
session until some work is done and then killed with every process it started (and run again to
resume), and what a killed run leaves in its staging store (simulated blocks, coverage chunks
marked done); a process alive, a port listened on, an HTTP server as a would-be scheduler, and a
run's own environment."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import zarr

from tests._ceilings import PROCESS_CEILING_S

if TYPE_CHECKING:
    from flows.spec import AuditSpec


def dpaudit() -> list[str]:
    """The `dpaudit` command of this virtualenv (``python -m flows.cli`` if not installed)."""
    exe = Path(sys.executable).with_name("dpaudit")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "flows.cli"]


def dask_cli() -> str:
    return str(Path(sys.executable).with_name("dask"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    """Something listens on ``port`` of 127.0.0.1."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def alive(pid: int) -> bool:
    """The process ``pid`` runs (a zombie does not)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@contextmanager
def serving_http() -> Iterator[str]:
    """``python -m http.server`` on a free port of 127.0.0.1 (it waits for a request: a handshake
    that sends nothing first hangs on it), as a Dask address; killed when the block ends."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = (
            time.monotonic() + PROCESS_CEILING_S
        )  # a ceiling: python starting on a busy machine
        while not port_open(port):
            assert time.monotonic() < deadline, "http.server did not start"
            time.sleep(0.05)
        yield f"tcp://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)


#: what a run inherits from this test process that would tie it to this process's log routing
INHERITED = (
    "PREFECT_API_URL",
    "DPAUDIT_RUN_LOG",
    "DASK_LOGGING",
    "PREFECT_LOGGING_CONFIG_PATH",
    "PREFECT_RESULTS_LOCAL_STORAGE_PATH",
)


def own_environment() -> dict[str, str]:
    """This process's environment without :data:`INHERITED`: a run's own log routing."""
    return {k: v for k, v in os.environ.items() if k not in INHERITED}


def wait_for(cond: Callable[[], bool], seconds: float, what: str, proc: subprocess.Popen) -> None:
    """Wait until ``cond()``; fail if ``proc`` ends first or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while not cond():
        assert proc.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"no {what} in {seconds} s"
        time.sleep(0.05)


def end(proc: subprocess.Popen) -> None:
    """Kill ``proc`` if it still runs, and reap it."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(30)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s process group (started with ``start_new_session``): it and every process
    it started, at once (what is left of it, if ``proc`` ended already)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # the group ended with its leader
        pass
    proc.wait(30)


def standalone_env() -> dict[str, str]:
    """This process's environment without ``PREFECT_API_URL``: a `dpaudit` command started with it
    starts its own API server, in its own process group (killed with it)."""
    return {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}


@dataclass(frozen=True)
class AuditRun:
    """`dpaudit run` of a spec written to a file (``--no-report``): the validated spec, its run id,
    the store it publishes and the staging store it builds first."""

    spec: AuditSpec
    run_id: str
    target: Path
    staging: Path
    cmd: list[str]


def audit_run(tmp_path: Path, data: dict[str, Any]) -> AuditRun:
    """The run of the spec mapping ``data`` (written to ``tmp_path/spec.toml``) into
    ``tmp_path/out/a.zarr``."""
    from flows.audit.flow import run_id_for
    from flows.spec import parse_spec
    from flows.spec.toml_writer import dump_toml
    from storage import store

    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(dump_toml(data))
    spec = parse_spec(data)
    run_id = run_id_for(spec)
    target = tmp_path / "out" / "a.zarr"
    staging = Path(store.staging_path(str(target), run_id))
    cmd = [*dpaudit(), "run", str(spec_path), "--store", str(target), "--no-report"]
    return AuditRun(spec, run_id, target, staging, cmd)


# --- a command killed midway, and run again -----------------------------------------------------

POLL_S = 0.05  # between looks at what the running command has done


class Running:
    """A command running in its own session (its pid is its process group's id), its stderr kept
    in an unnamed file; :meth:`wait` fails with that stderr's tail."""

    def __init__(self, proc: subprocess.Popen[bytes], stderr: IO[bytes], seconds: float) -> None:
        self.proc, self.stderr, self.seconds = proc, stderr, seconds
        self.deadline = time.monotonic() + seconds

    @property
    def pid(self) -> int:
        return self.proc.pid

    def tail(self, chars: int = 3000) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-chars:]

    def wait(self, cond: Callable[[], bool], what: str) -> None:
        """Wait until ``cond()``; fail if the command ends first or the deadline (``seconds`` from
        its start, for all the waits on it) passes."""
        while not cond():
            code = self.proc.poll()
            assert code is None, f"the command ended (exit {code}) before {what}:\n{self.tail()}"
            assert time.monotonic() < self.deadline, (
                f"no {what} in {self.seconds:g} s of the command:\n{self.tail()}"
            )
            time.sleep(POLL_S)


@contextmanager
def running(cmd: list[str], env: dict[str, str], cwd: Path, seconds: float) -> Iterator[Running]:
    """Start ``cmd`` in its own session; on leaving, SIGKILL its whole process group (it and every
    process it started: API server, cluster, workers) at once, and reap it."""
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
        try:
            yield Running(proc, stderr, seconds)
        finally:
            kill_group(proc)


def run_until(
    cmd: list[str],
    env: dict[str, str],
    cwd: Path,
    cond: Callable[[], bool],
    seconds: float,
    what: str,
) -> None:
    """Run ``cmd`` in its own session until ``cond()`` holds, then kill its whole process group
    (:func:`running`); fail, showing its stderr's tail, if it ends first or ``seconds`` pass."""
    with running(cmd, env, cwd, seconds) as run:
        run.wait(cond, what)


def resume(
    cmd: list[str], env: dict[str, str], cwd: Path, run_id: str, seconds: float
) -> subprocess.CompletedProcess[str]:
    """Run the killed command ``cmd`` again to its end: it succeeds and says it resumes the
    interrupted run ``run_id``."""
    again = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=seconds)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming the interrupted run {run_id}" in again.stderr, again.stderr[-3000:]
    return again


def one_line(stderr: str) -> str:
    """The one non-empty line of ``stderr`` (fails showing its tail otherwise)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


# --- a staged store --------------------------------------------------------------------------


def staging_dirs(out: Path) -> list[Path]:
    """The staged copies of ``out/a.zarr``."""
    return sorted(out.glob(".a.zarr.partial-*"))


def marked_blocks(out: Path) -> int:
    """Simulated blocks whose completion markers are written, in the staged stores under ``out``.

    The regions without data (the US level of a state in a nation's run) are marked by a task of
    their own, at any time of the run, and are not counted: a run resumes (and reports as resumed)
    only blocks it simulated."""
    n = 0
    for s in staging_dirs(out):
        marks = s / "residuals" / "block_sha256" / "c"
        if not marks.exists():
            continue
        for p in marks.rglob("*"):
            if not p.is_file():
                continue
            state, geolevel = (int(x) for x in p.relative_to(marks).parts[:2])
            items = zarr.open_array(s / "residuals" / "n_items", mode="r", zarr_format=3)
            n += int(items[state, geolevel]) > 0  # written before the marker
    return n


def done_markers(staging: Path, parts: str) -> int:
    """Chunks of a coverage experiment marked done in the group ``parts`` of its staged store."""
    marks = staging / parts / "part_done" / "c"
    return sum(1 for p in marks.rglob("*") if p.is_file()) if marks.exists() else 0


# --- a Dask cluster of processes --------------------------------------------------------------


@contextmanager
def dask_scheduler(env: dict[str, str], cwd: Path) -> Iterator[str]:
    """A `dask scheduler` process on a free local port; its address."""
    port = free_port()
    proc = subprocess.Popen(
        [dask_cli(), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield f"tcp://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(30)


class Workers:
    """`dask worker` processes (each with its nannies and their worker processes) in their own
    process groups, ended with their whole tree."""

    def __init__(self, address: str, env: dict[str, str], cwd: Path) -> None:
        self.address, self.env, self.cwd = address, env, cwd
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, n: int) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [dask_cli(), "worker", self.address, "--nworkers", str(n), "--nthreads", "1",
             "--memory-limit", "2GiB", "--no-dashboard"],
            cwd=self.cwd, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        self.procs.append(proc)
        wait_workers(self.address, n)
        return proc

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        kill_group(proc)  # the nannies' process and every worker it started

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                self.kill(proc)


def wait_workers(address: str, n: int, seconds: float = 120) -> list[int]:
    """Wait until the scheduler at ``address`` has ``n`` workers; their pids."""
    from distributed import Client

    with Client(address, timeout=seconds, set_as_default=False) as client:
        deadline = time.monotonic() + seconds
        while len(client.scheduler_info(n_workers=-1)["workers"]) != n:
            assert time.monotonic() < deadline, f"not {n} workers in {seconds} s"
            time.sleep(0.2)
        return sorted(client.run(os.getpid).values())
