"""The cluster chosen by configuration only: a Dask cluster class given by import path and kwargs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

from flows.audit import flow as audit
from flows.cli import run as cli
from flows.spec import parse_spec
from storage import store
from storage.result_store import ResultStore
from tests.integration._specs import tiny_spec

pytestmark = pytest.mark.integration

SMALL = tiny_spec(audit={"seed": 11})


def spec_with(tmp_path: Path, cluster: dict[str, Any]) -> Any:
    data = {
        **SMALL,
        "output": {"store": str(tmp_path / "a.zarr"), "report": str(tmp_path / "r.html")},
        "cluster": cluster,
    }
    return parse_spec(data)


@pytest.mark.slow
def test_cluster_class_by_import_path(prefect_harness: None, tmp_path: Path) -> None:
    s = spec_with(
        tmp_path,
        {
            "class": "distributed.LocalCluster",
            "kwargs": {"n_workers": 1, "threads_per_worker": 1, "dashboard_address": ":0"},
            "adapt": {"minimum": 1, "maximum": 2},
        },
    )
    url = s.output.store
    cli.run_audit(s, ResultStore.at(url), no_report=True)
    attrs = store.root_attrs(url)
    assert attrs["dask_scheduler"] == "distributed.LocalCluster"
    assert attrs["run_id"] == audit.run_id_for(s)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zarr"]


def test_cluster_class_with_bad_kwargs_exits_2_before_writing(
    prefect_harness: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = spec_with(
        tmp_path,
        {"class": "distributed.LocalCluster", "kwargs": {"n_workers": 1, "n_wrkers": 2}},
    )
    with pytest.raises(typer.Exit) as exc:
        cli.run_audit(s, ResultStore.at(s.output.store), no_report=True)
    assert exc.value.exit_code == 2
    err = capsys.readouterr().err
    assert "cluster.class = 'distributed.LocalCluster' did not start" in err
    assert "takes no argument 'n_wrkers'; remove or rename it in cluster.kwargs" in err
    assert list(tmp_path.iterdir()) == []
