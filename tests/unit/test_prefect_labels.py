"""What the Prefect UI shows of a run, as pure functions: tags and names from the spec, artifact keys,
the store's verify markdown, the sections' described schema, and which task errors are retried."""

from __future__ import annotations

import pytest

from auditlib.exceptions import DPAuditError, InvalidParameterError
from flows.spec import parse_spec


def _spec(**sections: dict[str, object]) -> object:
    return parse_spec(dict(sections))


def test_tags_name_allocation_release_population_and_neighbours() -> None:
    from flows.audit.labels import audit_tags

    spec = _spec(audit={"neighbours": "bounded", "tags": ["nightly", "dpaudit", "nightly"]})
    assert audit_tags(spec) == [
        "dpaudit",
        "allocation:dhcp_20220825_paper",
        "release:allocation",
        "population:synthetic",
        "neighbours:bounded",
        "nightly",
    ]


def test_a_geometric_release_has_no_allocation_tag_and_names_its_epsilon() -> None:
    from flows.audit.labels import audit_run_name, audit_tags

    spec = _spec(population={"kind": "flaxman", "people": 1000}, release={"kind": "gdpc"})
    assert not [t for t in audit_tags(spec) if t.startswith("allocation:")]
    assert "release:gdpc" in audit_tags(spec) and "population:flaxman" in audit_tags(spec)
    assert audit_run_name(spec, "ab12") == "audit gdpc ε=0.1 on flaxman, add_remove · ab12"


def test_tags_do_not_change_the_run_id() -> None:
    from flows.audit.flow import run_id_for

    assert run_id_for(_spec(audit={"tags": ["a", "b"]})) == run_id_for(_spec())
    assert run_id_for(_spec(audit={"seed": 1})) != run_id_for(_spec())


@pytest.mark.parametrize("tags", [[""], ["x" * 101], ["t"] * 21, "nightly"])
def test_bad_tags_are_refused_naming_the_key(tags: object) -> None:
    with pytest.raises(DPAuditError, match=r"audit\.tags"):
        _spec(audit={"tags": tags})


def test_artifact_keys_follow_prefects_rule() -> None:
    from flows.audit.artifacts import artifact_key

    assert artifact_key("audit", "3F9C00aa", "at-a-glance") == "audit-3f9c00aa-at-a-glance"
    with pytest.raises(ValueError, match="lowercase"):
        artifact_key("audit", "3f9c_00", "store")


def test_store_markdown_says_ok_or_lists_the_problems() -> None:
    from flows.audit.artifacts import store_markdown

    ok = store_markdown("/r/a.zarr", [], 12, 4)
    assert "verify: ok" in ok and "12 arrays and 4 blocks" in ok and "`/r/a.zarr`" in ok
    bad = store_markdown("/r/a.zarr", ["epl/x: checksum mismatch"], 0, 0)
    assert "verify: FAILED" in bad and "- epl/x: checksum mismatch" in bad


def test_section_schemas_carry_each_keys_meaning() -> None:
    from flows.spec.cluster import ClusterSection
    from flows.spec.sections import AccountingSection, AuditSection

    audit = AuditSection.model_json_schema()["properties"]
    assert audit["replicates"]["description"] == "simulated releases per (state, geolevel)"
    assert "Prefect" in audit["tags"]["description"]
    assert ClusterSection.model_json_schema()["properties"]["class"]["description"]
    assert AccountingSection.model_json_schema()["properties"]["headline_delta"]["description"]


class BotoCoreError(Exception):
    """Named like botocore's base error (an S3 timeout is one)."""


class CommClosedError(OSError):
    """Named like distributed's lost connection."""


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (TimeoutError("read timed out"), True),
        (ConnectionResetError("reset"), True),
        (CommClosedError("worker lost"), True),
        (BotoCoreError("endpoint timeout"), True),
        (InvalidParameterError("bad value"), False),
        (ValueError("not finite"), False),
        (KeyError("q"), False),
    ],
)
def test_only_transient_errors_are_retried(error: BaseException, retried: bool) -> None:
    from flows.audit.tasks import TASK_OPTS, is_transient

    assert is_transient(error) is retried
    assert TASK_OPTS["retries"] == 2 and TASK_OPTS["retry_condition_fn"] is not None


def test_sweep_table_reads_each_job_at_the_headline_delta() -> None:
    import numpy as np

    from flows.audit.artifacts import sweep_rows
    from flows.experiments.sweep import Job, sweep_dataset

    jobs = [Job("a1", "persons", "US", "add_remove", g) for g in ("US", "composed")]
    deltas = [1e-5, 1e-10]
    rng = np.random.default_rng(3)
    results = [
        {
            "rho": float(rng.uniform(0.1, 1)),
            "n_queries": 3,
            "sigma2_min": 1.0,
            "sigma2_max": 2.0,
            "method": "lattice",
            **{
                k: rng.uniform(1, 5, 2)
                for k in ("eps_exact_lower", "eps_exact_upper", "eps_bureau", "eps_cks")
            },
            "delta_exact_upper": np.zeros(4),
            "delta_bureau": np.zeros(4),
        }
        for _ in jobs
    ]
    ds = sweep_dataset(jobs, results, deltas, np.linspace(0, 1, 4))
    rows, delta = sweep_rows(ds)
    assert delta == 1e-10
    assert [r["level"] for r in rows] == ["US", "composed"]
    for r, res in zip(rows, results, strict=True):
        assert float(r["Bureau ε"]) == pytest.approx(res["eps_bureau"][1], rel=1e-4)
        assert float(r["ρ"]) == pytest.approx(res["rho"], rel=1e-4)
    rows_only_1e5, d5 = sweep_rows(ds.isel(delta=[0]))
    assert d5 == 1e-5 and float(rows_only_1e5[0]["Bureau ε"]) == pytest.approx(
        results[0]["eps_bureau"][0], rel=1e-4
    )


def test_coverage_and_direct_tables_read_the_stored_values() -> None:
    import numpy as np
    import xarray as xr

    from flows.audit.artifacts import coverage_rows, direct_rows

    cov = xr.Dataset(
        {
            "epsilon_c": (("mechanism", "epsilon0"), np.array([[0.5, 1.0], [0.7, 1.4]])),
            "coverage": (("mechanism", "epsilon0"), np.array([[0.95, 0.9], [1.0, 0.85]])),
            "exceeds_claim": (("mechanism", "epsilon0"), np.array([[0.0, 0.1], [0.0, 0.2]])),
        },
        coords={"mechanism": np.array(["laplace", "svt2"], dtype=object), "epsilon0": [0.5, 1.0]},
    )
    rows = coverage_rows(cov)
    assert [(r["mechanism"], float(r["ε₀"])) for r in rows] == [
        ("laplace", 0.5), ("laplace", 1.0), ("svt2", 0.5), ("svt2", 1.0)
    ]  # fmt: skip
    assert [float(r["coverage"]) for r in rows] == [0.95, 0.9, 1.0, 0.85]
    direct = xr.Dataset(
        {"eq": (("k_eq",), np.zeros(3)), "ge": (("k_ge",), np.zeros(5))},
        attrs={"epsilon": 1.0, "epl_eq": 0.8, "epl_lower_eq": 0.6, "epl_ge": 0.9,
               "epl_lower_ge": 0.7},
    )  # fmt: skip
    d = direct_rows(direct)
    assert [(r["events"], r["kept"]) for r in d] == [("eq", "3"), ("ge", "5")]
    assert float(d[1]["lower bound"]) == 0.7 and float(d[0]["known ε"]) == 1.0
