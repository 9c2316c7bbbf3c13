"""A published release declared post-processed (release.post_processing = "topdown"): the spec
(every level of the table measured, the reference release it names, the refusals), the number of
tests m, and the verdicts on TopDown releases of the shipped country published at the declared
noise (consistent), at a quarter of its σ² (ε about twice the claim: refuted) and at four times
it (more noise than declared: consistent) — each tested against dpaudit's own TopDown of the
declared allocation drawn from another stream."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from auditlib.claims.two_sample import size_class
from auditlib.exceptions import SpecError
from flows.audit.claims import (
    judge_post_processed_levels,
    published_levels,
    reference_plan,
)
from flows.audit.claims import tests_run as count_tests
from flows.spec import load_spec
from flows.spec.plan import make_plan
from tests._topdown_runs import COUNTRY, write_release

RUNS = 20
REFERENCE_RUNS = 60


def spec_of(where: Path, factor: float, seed: int) -> Path:
    spec = write_release(where, factor, RUNS, seed)
    text = spec.read_text().replace(
        'post_processing = "topdown"\n',
        f'post_processing = "topdown"\nreference_runs = {REFERENCE_RUNS}\n',
    )
    spec.write_text(text)
    return spec


def verdicts(spec_path: Path, alpha: float = 0.05) -> tuple[dict[str, str], list[dict]]:
    spec = load_spec(spec_path)
    plan = make_plan(spec)
    levels = published_levels(spec, plan)
    m = count_tests(spec, plan, levels)
    out = judge_post_processed_levels(spec, plan, levels, delta=1e-10, threshold=alpha / m)
    return {v["geolevel"]: v["verdict"] for v in out}, out


@pytest.fixture(scope="module")
def true_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The country's TopDown published at the declared noise: its spec."""
    return spec_of(tmp_path_factory.mktemp("true"), 1.0, 101)


def test_the_spec_measures_every_table_level_and_names_its_reference(true_release: Path) -> None:
    spec = load_spec(true_release)
    assert spec.observed_measured_as == {
        "US": "All",
        "State": "region",
        "County": "district",
        "Block": "village",
    }
    plan = make_plan(spec)
    assert plan.release == "observed" and plan.replicates == RUNS
    ref = reference_plan(spec, plan)
    assert ref.release == "topdown" and ref.replicates == REFERENCE_RUNS
    assert ref.geolevels == plan.geolevels
    assert ref.noise_seed != plan.noise_seed  # its own stream, not the run's noise
    assert reference_plan(spec, plan).noise_seed == ref.noise_seed  # and reproducible
    # m: one test per level and size class of its true counts, counted here from the file
    truth = pd.read_csv(COUNTRY / "country.csv")
    cells = [c for c in truth.columns if c not in ("region", "district", "village", "persons")]
    per_level = [
        truth[cells].sum().to_numpy(),
        truth.groupby("region")[cells].sum().to_numpy(),
        truth.groupby("district")[cells].sum().to_numpy(),
        truth[cells].to_numpy(),
    ]
    want = sum(len(np.unique(size_class(t.ravel()))) for t in per_level)
    assert count_tests(spec, plan, published_levels(spec, plan)) == want


@pytest.mark.slow  # end to end in the slow tier too: test_observed_flow.py
def test_true_half_and_conservative_claims(true_release: Path, tmp_path: Path) -> None:
    true, out = verdicts(true_release)
    assert true == dict.fromkeys(("US", "State", "County", "Block"), "consistent"), out
    half, out = verdicts(spec_of(tmp_path / "half", 0.25, 102))
    assert half == dict.fromkeys(("US", "State", "County", "Block"), "refuted"), out
    block = next(v for v in out if v["geolevel"] == "Block")
    assert block["evidence"]["measured_at"] == "village"
    assert block["evidence"]["reference_runs"] == REFERENCE_RUNS
    assert block["sentence"].startswith("refuted: less noise than declared")
    more, out = verdicts(spec_of(tmp_path / "more", 4.0, 103))
    assert set(more.values()) == {"consistent"}, out


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        # a TopDown declaration needs the table's levels mapped as a TopDown release's
        (
            (
                'levels = { US = "All", State = "region", County = "district", Tract = "", '
                'Block_Group = "", Block = "village" }'
            ),
            'release.post_processing = "topdown"',
        ),
        ('post_processing = "topdown"', "release.reference_runs"),
        ('post_processing = "median"', "post_processing"),
    ],
)
def test_bad_declarations_are_refused_by_name(true_release: Path, edit: str, words: str) -> None:
    text = true_release.read_text()
    if edit.startswith("levels"):  # County unmapped: the TopDown release cannot be built
        text = text.replace(edit, edit.replace('County = "district", ', ""))
    elif edit == 'post_processing = "topdown"':  # reference runs without a declaration
        text = text.replace(edit + "\n", "").replace(
            "levels = {", 'levels = { Block = "village" }\n#'
        )
    else:
        text = text.replace('post_processing = "topdown"', edit)
    spec = true_release.with_name(f"bad{abs(hash(edit))}.toml")  # beside its files
    spec.write_text(text)
    with pytest.raises(SpecError, match=words):
        load_spec(spec)


def test_a_post_processing_declaration_is_a_setting_of_an_observed_release() -> None:
    from flows.spec import parse_spec

    with pytest.raises(SpecError, match=r"release\.post_processing is a setting of an observed"):
        parse_spec({"release": {"post_processing": "topdown"}}, "spec")
