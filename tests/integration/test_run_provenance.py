"""A store's ``source_commit`` is the commit of the code as the run started, not as it ended: a
checkout moved on during a long run (a pull, a new commit) must not be named as the code that ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flows.audit import flow as audit
from flows.spec import parse_spec
from storage import store
from tests.integration._specs import tiny_spec

pytestmark = pytest.mark.integration


def test_the_source_commit_is_read_as_the_run_starts(
    prefect_harness: None, dask_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect_dask import DaskTaskRunner

    started: list[bool] = []
    make_plan = audit.make_plan

    def planning(spec: Any) -> Any:  # the run is under way once its plan is made
        started.append(True)
        return make_plan(spec)

    def commit() -> str:  # the checkout "moves" once the run is under way
        return "moved-during-the-run" if started else "as-the-run-started"

    monkeypatch.setattr(audit, "make_plan", planning)
    monkeypatch.setattr(audit, "source_commit", commit)
    s = parse_spec(tiny_spec(audit={"seed": 5}))
    url = str(tmp_path / "p.zarr")
    audit.audit_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))(
        s, url, audit.run_id_for(s)
    )
    store.finalize(url)
    assert started  # the plan was made through the patched function
    assert store.root_attrs(url)["source_commit"] == "as-the-run-started"
