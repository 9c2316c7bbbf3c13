"""A failed flow run leaves no pickled exception under ``$PREFECT_HOME/storage``.

Prefect 3.8.8 writes a failed flow run's exception to its local result storage whatever the flow's
``persist_result`` says (dpaudit's tasks, ``persist_result=False``, write nothing); a dpaudit process
points that storage at its private directory, which goes when the process ends (docs/stack.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests._ceilings import PROCESS_CEILING_S

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCRIPT = textwrap.dedent(
    """
    import json, os
    from flows.runtime.cluster import apply_prefect_defaults
    apply_prefect_defaults()  # as the CLI does, before Prefect is imported
    from prefect import flow
    from flows.runtime import runlog
    from flows.audit import tasks
    from flows.runtime.cluster import prefect_api

    @flow(name="failing", validate_parameters=False)
    def failing() -> None:
        tasks.account("no-such-allocation", "add_remove", "persons", "US", None, [1e-10], [1.0])

    with prefect_api():
        state = failing(return_state=True)
    results = runlog.private_dir() / "results"
    print(json.dumps({
        "failed": state.is_failed(),
        "message": state.message,
        "private": str(runlog.private_dir()),
        "results": sorted(p.name for p in results.iterdir()) if results.exists() else [],
    }))
    """
)


def test_a_failed_flow_leaves_no_exception_pickle_in_prefect_home(tmp_path: Path) -> None:
    inherited = (
        "PREFECT_API_URL",
        "DPAUDIT_RUN_LOG",
        "DASK_LOGGING",
        "PREFECT_LOGGING_CONFIG_PATH",
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH",
    )
    env = {k: v for k, v in os.environ.items() if k not in inherited}
    env["PREFECT_HOME"] = str(tmp_path / "home")
    env["DPAUDIT_LOG_DIR"] = str(tmp_path / "logs")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=PROCESS_CEILING_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["failed"] and "no-such-allocation" in out["message"], out
    # Prefect did write the flow's exception (one file: the task wrote none) -- to the private dir
    assert len(out["results"]) == 1, out
    storage = tmp_path / "home" / "storage"
    assert not storage.exists() or not any(storage.iterdir()), list(storage.iterdir())
    assert not Path(out["private"]).exists()  # removed when the process ended
    assert done.stderr.strip() == ""  # Prefect's failure reports went to the log file
