"""Audit spec validation: unknown keys, bad values and cross-checks name the field and the value."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from auditlib.exceptions import SpecError
from flows.spec import AuditSpec, default_spec_text, load_spec, parse_spec


def test_default_spec_is_valid_and_round_trips() -> None:
    s = load_spec()
    assert s.audit.allocation == "dhcp_20220825_paper"
    assert s.geolevels[0] == "US" and s.geolevels[-1] == "Block"
    again = parse_spec(tomllib.loads(s.to_toml()))
    assert again == s
    # the shipped file and the model defaults agree on what matters
    assert tomllib.loads(default_spec_text())["audit"]["replicates"] == s.audit.replicates


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        ({"audit": {"replicats": 3}}, r"audit\.replicats: unknown key"),
        ({"audit": {"replicates": -1}}, r"audit\.replicates = -1: .*greater than 0"),
        ({"accounting": {"deltas": [2]}}, r"accounting\.deltas = \[2\]: delta 2\.0 is outside"),
        ({"accounting": {"deltas": [0.0]}}, r"accounting\.deltas.*outside"),
        ({"audit": {"neighbours": "swap"}}, r"audit\.neighbours = 'swap': not allowed; allowed:"),
        ({"audit": {"allocation": "x"}}, r"audit\.allocation = 'x'.*dhcp_20220825_paper"),
        ({"population": {"fanout": {"Tract": 2}}}, r"fanout has unknown geolevel 'Tract'"),
        ({"simulation": {"queries": ["total"]}}, r"unknown query 'total'"),
        ({"epl": {"percentiles": [95, 5]}}, r"epl\.percentiles.*0 <= lower < upper <= 100"),
        ({"audit": {"universe": "units"}}, r"audit\.universe = 'units' is not in allocation"),
        ({"bogus": {}}, r"bogus: unknown key"),
        # a key the spec no longer takes says why and what to do
        ({"epl": {"method": "flaxman_petti"}}, r"epl\.method: no longer a key \(.*\); drop it"),
        ({"cluster": {"memory_limit": "lots"}}, r"cluster\.memory_limit = 'lots': must be a size"),
        # sizes are positive; integers are integers (no bool, no quoted or decimal number)
        ({"cluster": {"memory_limit": "-4GiB"}}, r"memory_limit = '-4GiB': must be a positive"),
        ({"cluster": {"memory_limit": "0B"}}, r"memory_limit = '0B': must be a positive"),
        ({"audit": {"replicates": True}}, r"audit\.replicates = True: must be an integer"),
        ({"audit": {"replicates": "2"}}, r"audit\.replicates = '2': must be an integer"),
        ({"audit": {"replicates": 2.0}}, r"audit\.replicates = 2\.0: must be an integer"),
        ({"audit": {"seed": 1.5}}, r"audit\.seed = 1\.5: must be an integer"),
        ({"cluster": {"n_workers": "2"}}, r"cluster\.n_workers = '2': must be an integer"),
        ({"population": {"fanout": {"County": 2.0}}}, r"fanout\.County = 2\.0: must be"),
    ],
)
def test_bad_specs_name_field_and_value(data: dict, pattern: str) -> None:
    with pytest.raises(SpecError, match=pattern):
        parse_spec(data)


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[audit\nseed = 1")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(bad)
    with pytest.raises(SpecError, match="not found"):
        load_spec(tmp_path / "missing.toml")
    deep = tmp_path / "deep.toml"  # tomllib recurses once per bracket
    deep.write_text("[audit]\nname = " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(SpecError, match=r"deep\.toml' nests its arrays or tables too deeply"):
        load_spec(deep)


def test_spec_is_frozen() -> None:
    s = AuditSpec()
    with pytest.raises(Exception, match="frozen"):
        s.audit.seed = 3  # type: ignore[misc]


def test_deltas_are_sorted_and_deduplicated() -> None:
    s = parse_spec({"accounting": {"deltas": [1e-10, 1e-5, 1e-10]}})
    assert s.accounting.deltas == [1e-5, 1e-10]


def test_release_and_population_kinds_must_match() -> None:
    with pytest.raises(
        SpecError, match=r"release\.kind = 'gdpc' needs population\.kind = 'flaxman'"
    ):
        parse_spec({"release": {"kind": "gdpc"}})
    with pytest.raises(SpecError, match=r"needs population\.kind = 'synthetic'"):
        parse_spec({"population": {"kind": "flaxman"}})
    s = parse_spec({"release": {"kind": "adpc"}, "population": {"kind": "flaxman", "levels": 2}})
    assert s.geolevels == ("L0", "L1", "L2")
    with pytest.raises(SpecError, match="too many"):
        parse_spec(
            {
                "release": {"kind": "gdpc"},
                "population": {"kind": "flaxman", "people": 10**8, "mean_per_location": 1.0},
            }
        )


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        ({"simulation": {"queries": []}}, r"simulation\.queries = \[\]: is empty"),
        ({"simulation": {"queries": ["detailed", "detailed"]}}, r"simulation\.queries .*twice"),
        ({"mpl": {"enabled": True, "geolevels": []}}, r"mpl\.geolevels = \[\]: is empty"),
        ({"mpl": {"enabled": True, "geolevels": ["State", "State"]}}, r"mpl\.geolevels .*twice"),
    ],
)
def test_empty_or_repeated_name_lists_are_refused(data: dict, pattern: str) -> None:
    """A run of 0 blocks (queries = []) or an MPL of no level is bad input, not an empty success."""
    with pytest.raises(SpecError, match=pattern):
        parse_spec(data)
    assert parse_spec({"simulation": {"queries": ["detailed"]}}).simulation.queries == ["detailed"]


def test_headline_delta_is_one_of_the_accounted_deltas() -> None:
    """The report's and the CLI's one δ (default the Bureau's 1e-10) is always accounted."""
    assert load_spec().accounting.headline_delta == 1e-10
    s = parse_spec({"accounting": {"deltas": [1e-6], "headline_delta": 1e-9}})
    assert s.accounting.deltas == [1e-6, 1e-9]
    assert parse_spec({"accounting": {"deltas": [1e-6]}}).accounting.deltas == [1e-6, 1e-10]
    for bad in (0.0, 1.0, -1e-10, float("nan"), float("inf")):
        with pytest.raises(SpecError, match=r"accounting\.headline_delta"):
            parse_spec({"accounting": {"headline_delta": bad}})


def test_people_bounded_by_what_a_population_can_hold() -> None:
    """population.people past MAX_PEOPLE (D and D′ of that many people would not fit) is refused."""
    from auditlib.geography.flaxman import MAX_PEOPLE

    pop = {"kind": "flaxman", "people": MAX_PEOPLE + 1}
    with pytest.raises(SpecError, match=r"population\.people = 400000001"):
        parse_spec({"release": {"kind": "gdpc"}, "population": pop})


def test_the_bias_aware_knobs_default_in_one_place() -> None:
    """The spec's [epl] knobs of the bias-aware estimate, estimate_epl's keywords and
    epl_surface's default to auditlib.epl.settings.DEFAULTS: a literal default anywhere fails."""
    import inspect

    from auditlib.epl import epl_surface, estimate_epl
    from auditlib.epl.settings import DEFAULTS
    from flows.spec.epl_section import EPLSection

    assert EPLSection().bias_aware_settings() == DEFAULTS
    assert load_spec().epl.bias_aware_settings() == DEFAULTS  # the shipped spec sets none
    sig = inspect.signature(estimate_epl).parameters
    knobs = ("bandwidth_kind", "range_multiplier", "shift", "n_boot", "confidence", "ci_kind")
    for name in (*knobs, "n_null", "null_quantile"):
        assert sig[name].default == getattr(DEFAULTS, name), name
    surface = inspect.signature(epl_surface).parameters
    assert surface["n_boot"].default == DEFAULTS.n_boot
    assert surface["confidence"].default == DEFAULTS.confidence
