"""A run that fails midway exits 1 and leaves nothing behind: no store, no staging directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

from flows.audit import flow as audit
from flows.cli import run as cli
from flows.spec import parse_spec
from storage.result_store import ResultStore
from tests.integration._stores import one_block_template

pytestmark = pytest.mark.integration


def test_failed_run_leaves_no_store(
    prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect import flow

    @flow(name="failing-audit")
    def failing(spec: Any, url: str, run_id: str) -> dict[str, Any]:
        one_block_template(url, run_id)
        assert Path(url).exists()  # half-written: the template is there
        raise RuntimeError("worker lost its disk")

    monkeypatch.setattr(audit, "audit_flow", failing)
    url = str(tmp_path / "out.zarr")
    spec = parse_spec({"output": {"store": url, "report": str(tmp_path / "r.html")}})
    with pytest.raises(typer.Exit) as exc:
        cli.run_audit(spec, ResultStore.at(url), no_report=False)
    assert exc.value.exit_code == 1
    assert list(tmp_path.iterdir()) == []  # neither the store, its staging copy, nor a report
