"""The words of a release's verdict on every face: a simulated release never reads as a privacy
failure (TopDown's post-processing bias named with its stored number), a published one shows its
claim verdict (report summary, at-a-glance table, Prefect artifact, CLI table, compare), "run ≥ N"
only where N ≤ 10⁵, and counts that match the data (published runs, composed levels)."""

from __future__ import annotations

import html as htmllib
import json
import math
import pathlib
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import xarray as xr
import zarr

from flows.report.render import render_report
from tests.unit.test_report import build_store

ALARMS = ("more loss than the claimed noise", "need attention", "refute", "failure")
#: the fixture's levels (tests/unit/test_report.py) and a made-up TopDown bias of their totals
LEVELS = ["US", "State", "County"]
BIAS = np.array([[np.nan, 0.0], [np.nan, 0.0], [0.83, -0.02]])
REFUTED = (
    "Refuted at County: the published runs' noise scale gives ε in [5.9, 6.4], above the "
    "declared 4.2 (p = 1.2e-06 < 0.0167)."
)


def _set_root(path: pathlib.Path, **attrs: Any) -> None:
    root = zarr.open_group(str(path), mode="r+")
    root.attrs.update(attrs)
    zarr.consolidate_metadata(str(path))


def _rewrite_epl(path: pathlib.Path, *, bias: bool) -> None:
    """Every estimate above its floor and unresolvable (σ² × 10⁴: the claimed noise's loss over
    the windows tiny), and for TopDown the bias of unit totals."""
    epl = xr.open_zarr(str(path), group="epl", chunks=None).load()
    ok = np.isfinite(epl["epl_bias_aware"].values)
    epl["epl_bias_aware"] = epl["epl_bias_aware"].where(~ok, 3.0)
    epl["epl_ci_low"] = epl["epl_ci_low"].where(~ok, 2.9)
    epl["epl_ci_high"] = epl["epl_ci_high"].where(~ok, 3.1)
    epl["epl_null_upper"] = epl["epl_null_upper"].where(~ok, 1.0)
    epl["sigma2"] = epl["sigma2"] * 1e4
    if bias:
        epl = epl.assign_coords(truth_class=np.array(["empty", "populated"], dtype=object))
        epl["total_bias"] = (("geolevel", "truth_class"), BIAS)
        epl["total_bias_units"] = (
            ("geolevel", "truth_class"),
            np.array([[0, 8], [0, 32], [9, 91]]),
        )
    epl.to_zarr(str(path), group="epl", mode="w", zarr_format=3, consolidated=True)
    zarr.consolidate_metadata(str(path))


def _add_claims(path: pathlib.Path, verdicts: dict[str, tuple[str, str]], basis: str) -> None:
    levels = list(verdicts)
    evidence = [
        json.dumps({"test": "scale", "p_value": 1.2e-6, "threshold": 0.0167, "n": 1800})
        if v == "refuted"
        else json.dumps({"test": "by_construction" if basis == "simulated" else "none"})
        for v, _ in verdicts.values()
    ]
    xr.Dataset(
        {
            "claim_verdict": ("geolevel", np.array([v for v, _ in verdicts.values()], object)),
            "claim_sentence": ("geolevel", np.array([s for _, s in verdicts.values()], object)),
            "claim_evidence": ("geolevel", np.array(evidence, dtype=object)),
        },
        coords={"geolevel": np.array(levels, dtype=object)},
        attrs={
            "alpha": 0.05,
            "n_tests": len(levels),
            "basis": basis,
            "delta": 1e-10,
            "rule": "Holm's step-down over the levels' tests",
        },
    ).to_zarr(str(path), group="claims", mode="w", zarr_format=3, consolidated=True)
    zarr.consolidate_metadata(str(path))


def _consistent(level: str) -> tuple[str, str]:
    return "consistent", f"Consistent by construction: dpaudit drew the noise of {level}."


def topdown_store(path: pathlib.Path, *, claims: bool = True) -> pathlib.Path:
    """A simulated TopDown store whose estimates all lie above their floors."""
    build_store(path, ("accounting", "epl", "residuals"))
    _set_root(path, release="topdown")
    _rewrite_epl(path, bias=True)
    if claims:
        _add_claims(path, {g: _consistent(g) for g in LEVELS}, "simulated")
    return path


def observed_store(path: pathlib.Path, *, refuted: bool = True) -> pathlib.Path:
    """A published release of 30 runs whose County claim is refuted (or all consistent)."""
    build_store(path, ("accounting", "epl", "residuals"))
    _set_root(path, release="observed", published_runs=30)
    _rewrite_epl(path, bias=False)
    verdicts = {g: ("consistent", f"Consistent at {g}: nothing contradicts it.") for g in LEVELS}
    if refuted:
        verdicts["County"] = ("refuted", REFUTED)
    _add_claims(path, verdicts, "observed")
    return path


def _between(html: str, start: str, end: str) -> str:
    i = html.index(start)
    return html[i : html.index(end, i)]


def _first_screen(html: str) -> str:
    """The header with its summary box, and the table "At a glance"."""
    return _between(html, "<header>", "</header>") + _between(
        html, '<section id="at-a-glance">', "</section>"
    )


def _text(html: str) -> str:
    return htmllib.unescape(re.sub(r"<[^>]+>", " ", html))


def _rendered(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    build: Callable[[pathlib.Path], pathlib.Path],
) -> tuple[pathlib.Path, str]:
    """The store ``build`` writes at ``<name>.zarr`` and the HTML of its report."""
    tmp = tmp_path_factory.mktemp("claims")
    store = build(tmp / f"{name}.zarr")
    return store, render_report(store, tmp / f"{name}.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def topdown(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, str]:
    return _rendered(tmp_path_factory, "topdown", topdown_store)


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, str]:
    return _rendered(tmp_path_factory, "observed", observed_store)


def test_a_simulated_topdown_release_reads_as_bias_not_loss(
    topdown: tuple[pathlib.Path, str],
) -> None:
    _, html = topdown
    text = _text(html).lower()
    assert "more loss than the claimed noise" not in text and "need attention" not in text
    summary = _text(_between(html, '<ul class="summary"', "</ul>"))
    # every estimate lies above its floor: counted, and explained by the stored bias
    assert "4 of 4 estimates lie above their floors" in summary
    assert (
        "TopDown's post-processing shifts empty units' totals by +0.83 and populated ones by "
        "\u22120.02 on average at level County (a released count cannot be negative, so noise "
        "can only raise an empty unit's total, and keeping the levels consistent takes it back "
        "from the populated ones): bias, not loss — post-processing cannot add privacy loss."
        in summary
    )
    assert "so this is no loss" in summary
    # EPL 3 lies above the exact ε of some level: no loss either
    assert "lies above the exact ε" in summary and "so this is no loss either" in summary
    assert summary.count("post-processing cannot add privacy loss") == 1
    assert "Claim: consistent at all 3 levels" in summary and "by construction" in summary


def test_no_alarm_word_on_the_first_screen_of_a_simulated_release(
    topdown: tuple[pathlib.Path, str],
) -> None:
    first = _text(_first_screen(topdown[1])).lower()
    for alarm in ALARMS:
        assert alarm not in first, alarm


def test_run_at_least_n_only_up_to_1e5(topdown: tuple[pathlib.Path, str]) -> None:
    """σ² × 10⁴ makes every estimate need far more than 10⁵ replicates: no "run ≥ N" anywhere,
    what dominates said instead."""
    html = topdown[1]
    needs = [int(n.replace("\u202f", "")) for n in re.findall(r"run ≥ ([\d\u202f]+)", html)]
    assert all(n <= 100_000 for n in needs), needs
    assert "post-processing bias dominates" in html
    summary = _text(_between(html, '<ul class="summary"', "</ul>"))
    assert "not even 100\u202f000 replicates would do" in summary


def test_resolution_words_beyond_1e5() -> None:
    from flows.report.release_basis import ReleaseBasis
    from flows.report.resolution import Resolution, resolution_words

    far = Resolution(1.0, 0.001, 0.999, 8, 304_008_165, None)
    near = Resolution(1.0, 0.5, 0.5, 8, 4_615, None)
    for basis in (ReleaseBasis("topdown"), ReleaseBasis("allocation"), ReleaseBasis("observed")):
        for short in (True, False):
            assert "≥" not in resolution_words(far, short=short, basis=basis)
            assert "dominate" in resolution_words(far, short=short, basis=basis)
    assert resolution_words(near, basis=ReleaseBasis("topdown")).endswith("run ≥ 4\u202f615")
    assert "bias" in resolution_words(far, short=True, basis=ReleaseBasis("topdown"))
    assert "window" in resolution_words(far, short=True, basis=ReleaseBasis("allocation"))
    # a published release: more published runs, not a longer run
    assert resolution_words(near, basis=ReleaseBasis("observed")) == (
        "not resolved at 8 published runs: needs ≥ 4\u202f615 published runs"
    )


def test_a_published_release_shows_its_refuted_claim(observed: tuple[pathlib.Path, str]) -> None:
    _, html = observed
    summary = _text(_between(html, '<ul class="summary"', "</ul>"))
    assert "Claim: refuted at County; consistent at US, State" in summary
    assert "familywise α = 0.05 over 3 tests" in summary
    assert REFUTED in summary
    glance = _between(html, '<table class="glance">', "</table>")
    county = next(r for r in glance.split("<tr")[1:] if 'class="level">County<' in r)
    assert '<span class="verdict alert">refuted</span>' in county
    assert _text(county).count(REFUTED) >= 1
    assert "Published runs" in html and 'id="replicates">30<' in html
    # the floor count describes; the verdict judges
    assert "the residuals show more loss" not in summary
    assert "whether the claim holds is the claim verdict's to say" in summary
    assert "published runs" in summary and "replicates" not in summary


def test_the_artifact_says_the_claim(tmp_path: pathlib.Path) -> None:
    from flows.audit.artifacts import at_a_glance, glance_description

    obs = at_a_glance(str(observed_store(tmp_path / "o.zarr")))
    county = next(r for r in obs.rows if r["level"] == "County")
    assert county["claim"] == f"refuted: {REFUTED}"
    assert "claim: refuted at County" in glance_description(obs)
    sim = at_a_glance(str(topdown_store(tmp_path / "t.zarr")))
    described = glance_description(sim)
    assert "claim: consistent at all 3 levels" in described
    assert "not loss" in described
    for alarm in ALARMS:
        assert alarm not in described.lower()
        assert all(alarm not in " ".join(r.values()).lower() for r in sim.rows)
    old = at_a_glance(str(topdown_store(tmp_path / "old.zarr", claims=False)))
    assert {r["claim"] for r in old.rows} <= {"not judged", "—"}
    assert "claim: not judged" in glance_description(old)


def test_compare_flags_a_changed_verdict(tmp_path: pathlib.Path) -> None:
    from flows.report.compare import compare
    from flows.report.compare_data import audit_numbers
    from flows.report.compare_text import json_dict, table_text

    a = audit_numbers(str(observed_store(tmp_path / "a.zarr", refuted=False)))
    b = audit_numbers(str(observed_store(tmp_path / "b.zarr")))
    c = compare(a, b)
    text = table_text(c)
    county = text[text.index("County\n") :]
    line = next(ln for ln in county.splitlines() if ln.startswith("  claim"))
    assert line.split() == ["claim", "consistent", "refuted", "changed"]
    assert "The claim verdict changed at County (consistent → refuted)." in " ".join(text.split())
    assert all(len(ln) <= 80 for ln in text.splitlines())
    out = json_dict(c)
    assert out["claims_changed"] == 1 and out["no_change"] is False
    assert {r["geolevel"]: r["status"] for r in out["claim_rows"]} == {
        "US": "same",
        "State": "same",
        "County": "changed",
    }
    same = compare(a, a)
    assert same.no_change and "claim" in table_text(same)


def test_an_older_store_renders_without_verdicts(tmp_path: pathlib.Path) -> None:
    store = topdown_store(tmp_path / "old.zarr", claims=False)
    html = render_report(store, tmp_path / "old.html").read_text(encoding="utf-8")
    assert '<th title="the verdict on the declared ε at the headline δ">Claim</th>' not in html
    assert "Claim:" not in _text(_between(html, '<ul class="summary"', "</ul>"))
    assert "the claim is not judged" in html


def test_cli_table_shows_the_verdicts_within_80_columns(
    observed: tuple[pathlib.Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from flows.cli.summary import print_headline_table
    from flows.report.claims import read_claims

    store = str(observed[0])
    acc = xr.open_zarr(store, group="accounting", chunks=None)
    claims = read_claims(xr.open_zarr(store, group="claims", chunks=None))
    print_headline_table(acc, claims)
    out = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in out)
    rows = {line.split()[0]: line.split() for line in out[1:4]}
    assert rows["County"][-1] == "refuted" and rows["US"][-1] == "consistent"
    said = " ".join(" ".join(out).split())
    assert "Claim: refuted at County" in said and REFUTED in said


def test_composed_levels_are_counted_truly() -> None:
    from flows.report.accounting import composed_words

    rho = np.array([0.06, 0.9, 0.28, 0.1])
    # the composed ρ of the rows: all of them
    assert composed_words(["a", "b", "c", "d"], rho, float(rho.sum())) == (
        "all 4 geographic levels"
    )
    # the allocation's levels beyond the rows (unsimulated, as the country example's)
    assert composed_words(["a", "b", "c", "d"], rho, 2.5, ["Tract", "Block_Group"]) == (
        "the allocation's 6 levels (the 4 here and Tract, Block_Group, not simulated)"
    )
    assert composed_words(["a", "b"], rho[:2], 2.5).startswith("every level of the allocation")
    # a published release: the declared allocation's levels, not the audited ones
    assert composed_words(["US", "State"], rho[:2], float(rho[:2].sum()), [], ["All"]) == (
        "the declared allocation's 2 levels (the rows of the accounting table)"
    )
    assert math.isclose(float(rho.sum()), 1.34)


def test_the_report_compared_with_another_store_flags_a_changed_verdict(
    tmp_path: pathlib.Path,
) -> None:
    before = observed_store(tmp_path / "before.zarr", refuted=False)
    after = observed_store(tmp_path / "after.zarr")
    html = render_report(after, tmp_path / "r.html", compare_with=before).read_text("utf-8")
    section = _between(html, '<section id="compared-with">', "</section>")
    rows = [_text("<tr" + r).split() for r in section.split("<tr")[1:] if ">Claim<" in r]
    assert ["Claim", "consistent", "refuted", "changed"] in rows
    assert rows.count(["Claim", "consistent", "consistent", "same"]) == 2
    assert "The claim verdict changed at County (consistent → refuted)." in _text(section)


def test_a_published_release_counts_its_runs_when_it_starts() -> None:
    """The logged run's first line: a published release's runs, not the spec's default 4."""
    from types import SimpleNamespace

    from flows.cli.run import runs_of
    from flows.spec.sections import AuditSection, ReleaseSection

    published = ReleaseSection(kind="observed", published=[[f"dp{r}"] for r in range(30)])
    spec = SimpleNamespace(release=published, audit=AuditSection())
    assert spec.audit.replicates == 4 and runs_of(spec) == "30 published runs"
    files = ReleaseSection(kind="observed", published_files=["a.csv", "b.csv"])
    assert runs_of(SimpleNamespace(release=files, audit=AuditSection())) == "2 published runs"
    simulated = SimpleNamespace(release=ReleaseSection(), audit=AuditSection(replicates=8))
    assert runs_of(simulated) == "8 replicates"
