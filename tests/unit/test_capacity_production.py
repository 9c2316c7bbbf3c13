"""Which ``bench_production.py`` runs the production capacity model reads
(``benchmarks/capacity.py``'s ``production_measured``): compute costs from the run with most
states (the newest among equals), stored bytes from the first run that wrote a store, a run that
did not end by the states it finished, and ``--runs`` naming them instead."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from capacity import production_measured


def _row(state: str, blocks: int, topdown: float, written: int) -> dict[str, Any]:
    return {
        "state": state,
        "blocks": blocks,
        "people": 40 * blocks,
        "pid": 1,
        "spine_cpu_s": 1.0,
        "population_cpu_s": blocks / 100,
        "topdown_cpu_s": [topdown],
        "write_cpu_s": [0.5],
        "cpu_s": topdown + 2,
        "peak_rss_mb": 500.0 + blocks,
        "written_bytes": written,
        "finished_s": 10.0,
        "load": 2.0,
    }


def _run(
    results: Path, name: str, started: str, rows: list[dict[str, Any]], store_bytes: int = 0
) -> None:
    store = f"--store {name}.zarr" if store_bytes else "--no-store"
    (results / f"{name}.json").write_text(
        json.dumps(
            {
                "started": started,
                "command": f"bench_production.py --states x {store} --out {name}.json",
                "states": len(rows),
                "replicates": 1,
                "workers": 2,
                "memory_limit": "8GB",
                "wall_s": 100.0,
                "cpu_s": sum(r["cpu_s"] for r in rows),
                "store_bytes": store_bytes,
                "written_bytes": sum(r["written_bytes"] for r in rows),
                "load_before": 1.0,
                "load_mean": 2.0,
                "load_after": 3.0,
                "per_state": rows,
            }
        )
    )


@pytest.fixture
def results(tmp_path: Path) -> Path:
    res = tmp_path / "benchmarks" / "results"
    res.mkdir(parents=True)
    # an older full run that wrote a store (300 bytes stored of 1,500 raw), with its states file
    old = [_row("S01", 200, 10.0, 1000), _row("S02", 100, 5.0, 500)]
    _run(res, "production_us_old", "2026-01-01T06:00:00+00:00", old, store_bytes=300)
    (res / "production_us_old.states.jsonl").write_text(
        "".join(json.dumps({**r, "command": "x"}) + "\n" for r in old)
    )
    # the same states later, faster, no store; listed after the old one by name
    new = [_row("S01", 200, 4.0, 0), _row("S02", 100, 2.0, 0)]
    _run(res, "production_us_a_new", "2026-01-01T07:00:00+00:00", new)
    # newest, but one state: only states the larger runs lack
    _run(res, "production_S01", "2026-01-01T08:00:00+00:00", [_row("S01", 200, 1.0, 0)])
    # a run that did not end: the state it finished (no .json)
    part = {**_row("S03", 50, 3.0, 0), "command": "bench_production.py --no-store"}
    (res / "production_part.states.jsonl").write_text(json.dumps(part) + "\n")
    return res


def test_compute_from_the_newest_largest_run_bytes_from_the_store_run(results: Path) -> None:
    summary, bytes_run, rows = production_measured(results)
    assert summary["name"] == "production_us_a_new"
    assert bytes_run is not None and bytes_run["name"] == "production_us_old"
    by = {r["state"]: r for r in rows}
    assert [r["state"] for r in rows] == ["S01", "S02", "S03"]  # largest first
    assert by["S01"]["topdown_cpu_s"] == [4.0] and by["S02"]["topdown_cpu_s"] == [2.0]
    assert by["S01"]["cpu_run"] == by["S02"]["cpu_run"] == "production_us_a_new"
    # raw bytes from the store run, stored at that run's own compression (300 / 1,500)
    assert (by["S01"]["written_bytes"], by["S01"]["stored_bytes"]) == (1000, 200.0)
    assert (by["S02"]["written_bytes"], by["S02"]["stored_bytes"]) == (500, 100.0)
    assert by["S01"]["bytes_run"] == "production_us_old"
    # the unfinished run's state fills in; no run stored it
    assert by["S03"]["cpu_run"] == "production_part" and by["S03"]["topdown_cpu_s"] == [3.0]
    assert by["S03"]["stored_bytes"] is None


def test_runs_named_in_order_of_preference(results: Path) -> None:
    summary, bytes_run, rows = production_measured(
        results, prefer=["production_S01", "production_us_old.json"]
    )
    by = {r["state"]: r for r in rows}
    assert summary["name"] == "production_S01" and set(by) == {"S01", "S02"}
    assert by["S01"]["topdown_cpu_s"] == [1.0] and by["S02"]["topdown_cpu_s"] == [5.0]
    assert bytes_run is not None and by["S02"]["stored_bytes"] == 100.0
    with pytest.raises(SystemExit, match="production_us_r9"):
        production_measured(results, prefer=["production_us_r9"])
