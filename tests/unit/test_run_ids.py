"""Every run id a store records is the same string as before the run ids shared one function
(``flows.experiments.chunked.run_id_of``): a store left by an interrupted run still resumes. Each id is
computed here the way its flow computed it on its own: the first 16 hex digits of the sha256 of the
JSON of its parameters, in the flow's order (a list) or keys sorted (a dict); the coverage and sweep
ids are also pinned as the strings the old functions returned."""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from flows.experiments.chunked import run_id_of
from tests.integration._specs import with_allocation_file

ALLOC = (
    "geolevel,query,mechanism,sigma2,neighbours\n"
    "State,total,discrete_gaussian,4,add_remove\nCounty,total,discrete_gaussian,2,add_remove\n"
)


def old_list_id(key: list[Any]) -> str:
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]


def old_dict_id(key: dict[str, Any], default: Any = None) -> str:
    text = json.dumps(key, sort_keys=True, default=default)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize(
    ("args", "pinned"),
    [
        ((["laplace", "laplace_broken"], [0.7], 60, 40_000, 100_000, 0.05, 11, 10), "293a3ed46a825206"),
        ((["laplace"], [0.7, 1.5], 20, 2_000, 5_000, 0.05, 3, 10), "68a087b255a07f47"),
    ],
)  # fmt: skip
def test_mpl_coverage_run_ids_are_unchanged(args: tuple[Any, ...], pinned: str) -> None:
    from flows.experiments.mpl_coverage import coverage_run_id

    mechs, eps, reps, n, big_n, alpha, seed, chunk = args
    old = old_list_id([mechs, [float(e) for e in eps], reps, n, big_n, float(alpha), seed, chunk])
    assert coverage_run_id(*args) == old == pinned


@pytest.mark.parametrize(
    ("args", "pinned"),
    [
        ((["laplace"], [0.5, 2.0], 20, 1_000, 5_000, 0.9, 8, 3, 10), "976b888851c080e3"),
        ((["gaussian", "laplace"], [1.0], 60, 20_000, 100_000, 0.95, 32, 11, 10), "7cd5732ecc1bb153"),
    ],
)  # fmt: skip
def test_fdp_coverage_run_ids_are_unchanged(args: tuple[Any, ...], pinned: str) -> None:
    from flows.experiments.fdp_coverage import fdp_coverage_run_id

    mechs, params, reps, n_select, n, conf, tests, seed, chunk = args
    key = ["fdp-coverage", mechs, [float(p) for p in params], reps, n_select, n, float(conf)]
    assert fdp_coverage_run_id(*args) == old_list_id([*key, tests, seed, chunk]) == pinned


@pytest.mark.parametrize(
    ("args", "pinned"),
    [
        ((["dhcp_20220825_paper"], ["add_remove"], [1e-5, 1e-10], 30), "b6b448eaba951b05"),
        ((["pl94_2021_production", "dhc_2023_production"], ["add_remove", "bounded"], [1e-5], 200), "e5c2298c21dc4661"),
    ],
)  # fmt: skip
def test_sweep_run_ids_are_unchanged(args: tuple[Any, ...], pinned: str) -> None:
    from flows.experiments.sweep import sweep_run_id

    allocs, nbs, deltas, points = args
    old = old_list_id([allocs, nbs, [float(d) for d in deltas], points])
    assert sweep_run_id(*args) == old == pinned


def test_a_sweep_of_an_allocation_file_counts_its_bytes(tmp_path: Path) -> None:
    from flows.experiments.sweep import sweep_run_id

    path = tmp_path / "mine.csv"
    path.write_text(ALLOC, encoding="utf-8")
    allocs = ["dhcp_20220825_paper", str(path)]
    digest = hashlib.sha256(ALLOC.encode()).hexdigest()
    old = old_list_id([allocs, ["bounded"], [1e-6], 50, [digest]])
    assert sweep_run_id(allocs, ["bounded"], [1e-6], 50) == old


def test_direct_run_ids_are_unchanged(tmp_path: Path) -> None:
    from flows.experiments.direct_loss import direct_run_id
    from flows.experiments.direct_runs import DirectParams, SpecDirectParams
    from flows.spec.digests import content_addressed

    for p in (
        DirectParams(),
        DirectParams(
            people=5_000, levels=2, mean_per_location=20.0, algorithm="gdpc", epsilon=1.0,
            to_leaf=100, replicates=400, chunk=100, seed=4, min_events=20,
        ),
    ):  # fmt: skip
        old = old_dict_id({**asdict(p), "kind": "DirectParams"}, default=str)
        assert direct_run_id(p) == old

    text = with_allocation_file(
        tmp_path, ALLOC, 'seed = 3\n[output]\nstore = "x.zarr"\n[cluster]\nn_workers = 2\n'
    )
    p = SpecDirectParams(spec=text, replicates=10, chunk=5, seed=9)
    raw = asdict(p)
    sections = {k: v for k, v in tomllib.loads(text).items() if k not in ("output", "cluster")}
    content_addressed(sections)
    old = old_dict_id({**raw, "spec": sections, "kind": "SpecDirectParams"}, default=str)
    assert direct_run_id(p) == old


def test_audit_run_ids_are_unchanged(tmp_path: Path) -> None:
    from flows.audit.flow import run_id_for
    from flows.spec import load_spec, parse_spec
    from flows.spec.digests import content_addressed

    (tmp_path / "mine.csv").write_text(ALLOC, encoding="utf-8")
    spec = tmp_path / "spec.toml"
    spec.write_text('[audit]\nallocation = "mine.csv"\nseed = 3\ntags = ["a"]\n', encoding="utf-8")
    for s in (parse_spec({}), parse_spec({"audit": {"seed": 1, "tags": ["x"]}}), load_spec(spec)):
        data = s.model_dump(mode="json")
        data.pop("output", None)
        data.pop("cluster", None)
        data["audit"].pop("tags", None)
        content_addressed(data)
        assert run_id_for(s) == old_dict_id(data)


def test_run_id_of_hashes_sorted_json() -> None:
    key = {"b": [1, 2.5, "x"], "a": None}
    assert run_id_of(key) == hashlib.sha256(b'{"a": null, "b": [1, 2.5, "x"]}').hexdigest()[:16]
    assert len(run_id_of([])) == 16
