"""Real worker deaths: a worker SIGKILLed mid-run, and a task that kills every worker that runs it.

Deaths are injected from the test with a Dask worker plugin (nothing in the shipped code can kill a
worker): inside the simulation task of one block, after Prefect has marked its task run Running, the
worker process SIGKILLs itself, once (a marker file records it) or every time.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import xarray as xr
from distributed.diagnostics.plugin import WorkerPlugin

from flows.audit import flow as audit
from flows.cli import run as cli
from flows.spec import parse_spec
from storage import schema as S
from storage import store
from storage.result_store import ResultStore
from tests.integration._specs import tiny_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPEC = tiny_spec(states=2, fanout={"County": 2, "Block_Group": 2}, audit={"seed": 31})


#: seconds a poisoned task runs before its worker dies
POISON_DELAY_S = 5.0


class KillInBlockWrite(WorkerPlugin):
    """SIGKILL this worker inside the simulation task of block (``state``, ``geolevel``), just before
    it writes its region: once (``marker`` records it) or, with ``marker=None``, every time."""

    name = "kill-in-block-write"

    def __init__(self, state: int, geolevel: int, marker: str | None) -> None:
        self.block = (state, geolevel)
        self.marker = marker

    def setup(self, worker: Any) -> None:
        # the module whose function the store object calls for every block write
        from storage import residual_blocks as worker_store

        original = worker_store.write_residual_block

        def write(url: str, state: int, geolevel: int, *args: Any, **kwargs: Any) -> int:
            if (state, geolevel) == self.block and args[0] is not None and self._first():
                if self.marker is None:
                    # as an out-of-memory kill would, let the task run a moment first: its
                    # Running state reaches the Prefect API (events are sent asynchronously)
                    time.sleep(POISON_DELAY_S)
                os.kill(os.getpid(), signal.SIGKILL)
            return original(url, state, geolevel, *args, **kwargs)

        worker_store.write_residual_block = write

    def _first(self) -> bool:
        if self.marker is None:
            return True
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False  # killed once already
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    import dask
    from distributed import Client, LocalCluster

    with (
        # a task is given up (KilledWorker) after 2 worker deaths instead of 4: the same path, faster
        # and the TCP timeout every cluster a run starts takes (flows/runtime/dask_tcp.py): a worker busy in
        # an accounting task on a loaded machine is not dropped by the kernel after 30 s
        dask.config.set(
            {
                "distributed.scheduler.allowed-failures": 1,
                "distributed.comm.timeouts.tcp": "600s",
            }
        ),
        LocalCluster(
            n_workers=request.param,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        ) as c,
        Client(c) as client,
    ):
        yield client


def spec_for(tmp_path: Path, name: str, address: str, seed: int, **cluster: Any) -> Any:
    data = {
        **SPEC,
        "audit": {**SPEC["audit"], "seed": seed},
        "output": {"store": str(tmp_path / name), "report": str(tmp_path / "r.html")},
        "cluster": {"scheduler": address, **cluster},
    }
    return parse_spec(data)


def task_runs_of(run_id: str) -> list[Any]:
    """Task runs of the only flow run named for ``run_id`` (a run that published no store)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    with get_client(sync_client=True) as client:  # "audit <what was audited> · <run id>"
        flow_runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_=run_id))
        )
        assert len(flow_runs) == 1
    return task_runs_of_flow_run(str(flow_runs[0].id))


def task_runs_of_flow_run(flow_run_id: str) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter

    with get_client(sync_client=True) as client:
        return client.read_task_runs(
            flow_run_filter=FlowRunFilter(id={"any_": [flow_run_id]}), limit=200
        )


@pytest.mark.parametrize("cluster", [2], indirect=True)
def test_worker_killed_mid_run_gives_the_same_store(
    prefect_harness: None, cluster: Any, tmp_path: Path
) -> None:
    address = cluster.scheduler.address
    calm = spec_for(tmp_path, "calm.zarr", address, seed=31)
    cli.run_audit(calm, ResultStore.at(calm.output.store), no_report=True)

    pids_before = set(cluster.run(os.getpid).values())
    marker = tmp_path / "killed"
    cluster.register_plugin(KillInBlockWrite(1, 3, str(marker)))
    hit = spec_for(tmp_path, "hit.zarr", address, seed=31)
    cli.run_audit(hit, ResultStore.at(hit.output.store), no_report=True)

    killed = int(marker.read_text())  # a worker died running a simulation block ...
    assert killed in pids_before
    assert killed not in set(cluster.run(os.getpid).values())  # ... and the nanny replaced it
    for group in (S.RESIDUALS, S.EPL, S.ACCOUNTING):
        a = store.open_group(calm.output.store, group).load()
        b = store.open_group(hit.output.store, group).load()
        xr.testing.assert_equal(a, b)  # every array identical to the undisturbed run
    # the two runs share a run id (same spec but for output and cluster): find the disturbed one
    # by the flow run id its store records
    flow_run_id = store.root_attrs(hit.output.store)["prefect_flow_run_id"]
    assert flow_run_id != store.root_attrs(calm.output.store)["prefect_flow_run_id"]
    states = {tr.state_type.value for tr in task_runs_of_flow_run(flow_run_id)}
    assert states == {"COMPLETED"}


@pytest.mark.parametrize("cluster", [1], indirect=True)
def test_task_that_kills_every_worker_fails_cleanly(
    prefect_harness: None,
    cluster: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cluster.register_plugin(KillInBlockWrite(1, 3, None))
    # one task per block, so the task run that failed is named for the block that killed its worker
    s = spec_for(tmp_path, "poison.zarr", cluster.scheduler.address, seed=32, tasks_per_worker=0)
    with pytest.raises(typer.Exit) as exc:
        cli.run_audit(s, ResultStore.at(s.output.store), no_report=True)
    assert exc.value.exit_code == 1
    err = capsys.readouterr().err
    assert "the run failed: KilledWorker" in err and "out of memory?" in err
    # no store; the staging copy keeps the blocks the other tasks finished, for a run with more
    # memory to resume
    (staged,) = tmp_path.iterdir()
    assert staged.name.startswith(".poison.zarr.partial-")
    assert f"the staged store {str(staged)!r} keeps its " in err
    assert "finished block(s): run the same command again to resume it" in err

    runs = task_runs_of(audit.run_id_for(s))
    by_state: dict[str, list[str]] = {}
    for tr in runs:
        by_state.setdefault(tr.state_type.value, []).append(tr.name)
    assert set(by_state) <= {"COMPLETED", "FAILED"}, by_state  # nothing left Running
    assert by_state["FAILED"] == ["simulate ST01/Prim"]  # state 1, geolevel 3
    failed = next(tr for tr in runs if tr.state_type.value == "FAILED")
    assert "had not finished" in failed.state.message and "KilledWorker" in failed.state.message
    assert len(by_state["COMPLETED"]) == len(runs) - 1  # the other tasks ran to the end
