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


def test_a_staging_copy_names_its_commit_and_a_resume_on_other_code_is_recorded(
    prefect_harness: None, dask_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unfinished store names the commit its run started on (its costs are read from it before
    the run ends); a resume by other code keeps that commit and adds its own, and the report's
    header says both."""
    from prefect_dask import DaskTaskRunner

    from flows.report.header import source_line

    code = ["first"]
    monkeypatch.setattr(audit, "source_commit", lambda: code[0])
    write_groups = audit.write_groups

    def stopped(*args: Any, **kwargs: Any) -> Any:  # the run stops once every block is written
        raise RuntimeError("stopped before the groups are written")

    monkeypatch.setattr(audit, "write_groups", stopped)
    s = parse_spec(tiny_spec(audit={"seed": 6}))
    url = str(tmp_path / "r.zarr")
    flow = audit.audit_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    with pytest.raises(RuntimeError, match="stopped before"):
        flow(s, url, audit.run_id_for(s))
    assert not store.is_complete(url)
    attrs = store.root_attrs(url)
    assert attrs["source_commit"] == "first"
    assert "resumed_commits" not in attrs

    monkeypatch.setattr(audit, "write_groups", write_groups)
    code[0] = "second"
    out = flow(s, url, audit.run_id_for(s))
    assert out["resumed_blocks"] == out["blocks"] > 0  # every block was kept, none redone
    store.finalize(url)
    attrs = store.root_attrs(url)
    assert (attrs["source_commit"], attrs["resumed_commits"]) == ("first", ["second"])
    assert source_line(attrs) == "first (resumed on second)"


def test_resumed_commits_name_each_other_commit_once() -> None:
    assert audit.resumed_commits({}, "a") == {"source_commit": "a"}  # a copy from before stamps
    assert audit.resumed_commits({"source_commit": "a"}, "a") == {}
    assert audit.resumed_commits({"source_commit": "a"}, "b") == {"resumed_commits": ["b"]}
    kept = {"source_commit": "a", "resumed_commits": ["b"]}
    assert audit.resumed_commits(kept, "b") == {}
    assert audit.resumed_commits(kept, "a") == {}
    assert audit.resumed_commits(kept, "c") == {"resumed_commits": ["b", "c"]}
