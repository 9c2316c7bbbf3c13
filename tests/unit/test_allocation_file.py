"""Allocation files: shipped allocations exported and read back give the same numbers exactly;
single queries of each mechanism against closed forms; bad files name their line and column."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from scipy import optimize, special
from typer.testing import CliRunner

from auditlib.accounting import PrivacyLossComposition
from auditlib.allocation_file import MAX_SENSITIVITY, parse_csv, parse_toml
from auditlib.allocations import export_allocation, list_allocations, load_allocation
from auditlib.exceptions import DPAuditError, InvalidParameterError
from flows.cli.accounting_results import account_levels
from flows.cli.app import app

runner = CliRunner()
NEIGHBOURS = ("add_remove", "bounded")


def account_json(args: list[str]) -> dict:
    res = runner.invoke(app, ["account", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def write(tmp_path: Path, text: str, name: str = "alloc.csv") -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


# --- round trip --------------------------------------------------------------------------------


@pytest.mark.parametrize("allocation_id", list_allocations())
def test_export_reads_back_to_the_same_components(tmp_path: Path, allocation_id: str) -> None:
    shipped = load_allocation(allocation_id)
    path = write(tmp_path, export_allocation(allocation_id))
    read = load_allocation(path)
    assert read.neighbours is None  # read under either relation, as the shipped file
    for n in NEIGHBOURS:
        for u in shipped.universes():
            assert read.regions(u) == shipped.regions(u)
            for r in shipped.regions(u):
                assert read.geolevels(u, r) == shipped.geolevels(u, r)
                for g in shipped.geolevels(u, r):
                    assert read.components(n, u, r, g) == shipped.components(n, u, r, g)
                    assert read.rho(u, r, g) == shipped.rho(u, r, g)  # exact fractions
    assert [q.n_cells for q in read.queries] == [q.n_cells for q in shipped.queries]


@pytest.mark.parametrize("allocation_id", list_allocations())
@pytest.mark.parametrize("neighbours", NEIGHBOURS)
def test_account_of_the_export_equals_the_account_of_the_id(
    tmp_path: Path, allocation_id: str, neighbours: str
) -> None:
    path = write(tmp_path, export_allocation(allocation_id))
    shipped, read = load_allocation(allocation_id), load_allocation(path)
    levels = list(shipped.geolevels())[:2]  # the top two levels: the rest is the same code
    a = account_levels(shipped, neighbours, "persons", "US", levels, [1e-5, 1e-10], False)
    b = account_levels(read, neighbours, "persons", "US", levels, [1e-5, 1e-10], False)
    assert b.pop("allocation") == path and a.pop("allocation") == allocation_id
    assert a == b  # every number, exactly


def test_cli_export_and_account_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "exp21.csv"
    res = runner.invoke(app, ["allocation", "export", "dhcp_20220825_exp21_1", "-o", str(out)])
    assert res.exit_code == 0, res.output
    for n in NEIGHBOURS:
        a = account_json(["-a", "dhcp_20220825_exp21_1", "-n", n, "-d", "1e-10"])
        b = account_json(["-a", str(out), "-n", n, "-d", "1e-10"])
        assert a.pop("allocation") == "dhcp_20220825_exp21_1" and b.pop("allocation") == str(out)
        assert a == b
    again = runner.invoke(app, ["allocation", "export", "dhcp_20220825_exp21_1", "-o", str(out)])
    assert again.exit_code == 2 and "already exists" in again.stderr


# --- single queries against closed forms ---------------------------------------------------------


def test_geometric_query_is_pure_sensitivity_over_scale(tmp_path: Path) -> None:
    """Three cells moved, each with two-sided geometric noise of scale b = 5/2: pure ε = 3/b = 1.2
    exactly (δ(1.2) = 0, δ(1.2 − 1e-6) > 0); below it only the top loss 3ε₀ exceeds ε, so
    ε(δ) = 3ε₀ + ln(1 − δ/p³) with p = 1/(1 + e^(−ε₀))."""
    path = write(
        tmp_path,
        "geolevel,query,mechanism,scale,sensitivity,neighbours\n"
        "State,total,geometric,5/2,3,bounded\n",
    )
    eps_pure = 3 / 2.5
    out = account_json(["-a", path, "-n", "bounded", "-e", str(eps_pure), "-e", "1.199999"])
    at, below = out["levels"][0]["delta"]
    assert at["exact_lower"] == 0.0 and at["exact_upper"] <= 1e-15
    assert below["exact_lower"] > 0.0
    e0 = 0.4
    p3 = (1 / (1 + math.exp(-e0))) ** 3
    d = 1e-3
    out = account_json(["-a", path, "-n", "bounded", "-d", str(d), "--no-composed"])
    e = out["levels"][0]["epsilon"][0]
    reference = 3 * e0 + math.log1p(-d / p3)
    assert reference > e0  # only the top loss exceeds ε: the closed form holds
    assert e["exact_lower"] - 1e-12 <= reference <= e["exact_upper"] + 1e-12
    assert e["exact_upper"] - e["exact_lower"] < 1e-6


def test_discrete_gaussian_noise_equals_the_shipped_rho_path(tmp_path: Path) -> None:
    """The State queries of PL94-171 given by σ² = 1/ρ_q under bounded (the noise the DAS drew)
    account exactly as the shipped allocation's ρ_q do."""
    shipped = load_allocation("pl94_2021_production")
    rows = [
        f"{q.geolevel},{q.query},{q.n_cells},discrete_gaussian,{1 / q.rho},bounded"
        for q in shipped.select("persons", "US", "State")
    ]
    path = write(tmp_path, "geolevel,query,cells,mechanism,sigma2,neighbours\n" + "\n".join(rows))
    args = ["-n", "bounded", "-l", "State", "-d", "1e-5", "-d", "1e-10", "--no-composed"]
    a = account_json(["-a", "pl94_2021_production", *args])["levels"][0]
    b = account_json(["-a", path, *args])["levels"][0]
    assert a == b
    assert b["method"] == "exact-lattice"


def balle_wang_delta(mu: float, eps: float) -> float:
    """Analytic Gaussian mechanism (Balle & Wang 2018, Thm. 8) with Δ/σ = μ."""
    return float(special.ndtr(mu / 2 - eps / mu) - math.exp(eps) * special.ndtr(-mu / 2 - eps / mu))


@pytest.mark.parametrize(("sigma", "sensitivity", "delta"), [(3.0, 2, 1e-6), (0.75, 1, 1e-10)])
def test_gaussian_query_matches_the_analytic_gaussian_mechanism(
    tmp_path: Path, sigma: float, sensitivity: int, delta: float
) -> None:
    path = write(
        tmp_path,
        "geolevel,query,mechanism,sigma,sensitivity,neighbours\n"
        f"County,sex,gaussian,{sigma},{sensitivity},add_remove\n",
    )
    mu = math.sqrt(sensitivity) / sigma  # `sensitivity` cells move by one: L2 norm √Δ
    reference = optimize.brentq(lambda e: balle_wang_delta(mu, e) - delta, 0.0, 200.0, xtol=1e-14)
    losses = load_allocation(path).losses("add_remove", geolevel="County")
    acc = PrivacyLossComposition(losses, grid=2.0**-14)  # a coarse grid: a fast, wider bracket
    e = acc.epsilon(delta)
    assert acc.method == "bracket-grid"
    assert e.lower - 1e-9 <= reference <= e.upper + 1e-9
    assert e.upper - e.lower <= 2 * acc.rounding_width


def test_mixed_file_composes_every_mechanism(tmp_path: Path) -> None:
    """A mixed level: its ε(δ) lies above each query's alone and its ρ is the queries' sum."""
    path = write(
        tmp_path,
        "geolevel,query,mechanism,rho,sigma2,scale,sigma,neighbours\n"
        "State,a,geometric,,,2,,add_remove\n"
        "State,b,discrete_gaussian,,4,,,add_remove\n"
        "State,c,laplace,,,3,,add_remove\n"
        "State,d,gaussian,,,,2.5,add_remove\n"
        "County,e,discrete_gaussian,1/8,,,,add_remove\n",
    )
    out = account_json(["-a", path, "-d", "1e-10", "--max-work", "2e8"])  # a coarser grid
    state, county = out["levels"]
    assert state["rho"] == pytest.approx(1 / 8 + 1 / 8 + 1 / 18 + 1 / 12.5)  # ε₀²/2 or 1/(2σ²)
    assert county["rho"] == 1 / 8
    assert state["mechanisms"] == ["DiscreteGaussian", "Gaussian", "Geometric", "Laplace"]
    composed = out["composed"]["epsilon"][0]
    assert composed["exact_lower"] > state["epsilon"][0]["exact_upper"]
    bad = runner.invoke(app, ["account", "-a", path, "-n", "bounded"])
    assert bad.exit_code == 2 and "--neighbours add_remove" in bad.stderr


def test_toml_file_reads_as_the_csv(tmp_path: Path) -> None:
    csv_text = (
        "geolevel,query,cells,mechanism,rho,scale,neighbours\n"
        "State,total,1,discrete_gaussian,1/4,,bounded\n"
        "County,total,1,geometric,,2,bounded\n"
    )
    toml_text = """neighbours = "bounded"
[[query]]
geolevel = "State"
query = "total"
cells = 1
mechanism = "discrete_gaussian"
rho = "1/4"
[[query]]
geolevel = "County"
query = "total"
mechanism = "geometric"
scale = 2
"""
    a = load_allocation(write(tmp_path, csv_text))
    b = load_allocation(write(tmp_path, toml_text, "alloc.toml"))
    assert a.neighbours == b.neighbours == "bounded"
    assert a.losses("bounded") == b.losses("bounded")


def test_discrete_gaussian_components_refuse_other_noise(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "geolevel,query,mechanism,scale,neighbours\nState,total,laplace,2,add_remove\n",
    )
    alloc = load_allocation(path)
    with pytest.raises(InvalidParameterError, match=r"'total' at State \(line 2\) adds laplace"):
        alloc.components("add_remove")


# --- bad files -----------------------------------------------------------------------------------

HEAD = "geolevel,query,cells,mechanism,rho,sigma2,scale,sigma,neighbours\n"

BAD = [
    ("empty", "", "line 1", None, "empty"),
    ("blank-lines-only", "\n\n", "line 1", None, "empty"),
    ("header-only", HEAD, "line 2", None, "no query rows"),
    (
        "missing-mechanism",
        "geolevel,query,rho\nState,total,1/2\n",
        "line 1",
        "mechanism",
        "missing",
    ),
    ("no-noise-column", "geolevel,query,mechanism\nState,t,geometric\n", "line 1", "rho", "noise"),
    ("unknown-column", "geolevel,query,mechanism,rhoo\n", "line 1", "rhoo", "unknown column"),
    ("nan", HEAD + "State,t,1,discrete_gaussian,nan,,,,\n", "line 2", "rho", "not finite"),
    (
        "negative",
        HEAD + "State,t,1,discrete_gaussian,,-4,,,add_remove\n",
        "line 2",
        "sigma2",
        "> 0",
    ),
    ("zero-scale", HEAD + "State,t,1,geometric,,,0,,add_remove\n", "line 2", "scale", "> 0"),
    ("word", HEAD + "State,t,1,discrete_gaussian,half,,,,\n", "line 2", "rho", "not a number"),
    ("unknown-mechanism", HEAD + "State,t,1,poisson,1,,,,\n", "line 2", "mechanism", "poisson"),
    (
        "unknown-relation",
        HEAD + "State,t,1,discrete_gaussian,1,,,,replace\n",
        "line 2",
        "neighbours",
        "'replace'",
    ),
    (
        "two-relations",
        HEAD
        + "State,t,1,discrete_gaussian,1,,,,bounded\nState,u,1,discrete_gaussian,1,,,,add_remove\n",
        "line 3",
        "neighbours",
        "one neighbour relation",
    ),
    (
        "duplicate",
        HEAD + "State,t,1,discrete_gaussian,1,,,,\nCounty,t,1,discrete_gaussian,1,,,,\n"
        "State,t,2,discrete_gaussian,2,,,,\n",
        "line 4",
        "query",
        "first on line 2",
    ),
    ("cells-word", HEAD + "State,t,many,discrete_gaussian,1,,,,\n", "line 2", "cells", "integer"),
    ("cells-float", HEAD + "State,t,2.5,discrete_gaussian,1,,,,\n", "line 2", "cells", "integer"),
    (
        "two-noises",
        HEAD + "State,t,1,discrete_gaussian,1,4,,,\n",
        "line 2",
        "rho/sigma2",
        "exactly one",
    ),
    (
        "wrong-noise",
        HEAD + "State,t,1,geometric,1,,,,\n",
        "line 2",
        "rho",
        "gives scale, not rho",
    ),
    (
        "noise-without-relation",
        HEAD + "State,t,1,discrete_gaussian,,4,,,\n",
        "line 2",
        "sigma2",
        "neighbours column",
    ),
    ("empty-query", HEAD + "State,,1,discrete_gaussian,1,,,,\n", "line 2", "query", "is empty"),
    ("too-many-fields", HEAD + "State,t,1,discrete_gaussian,1,,,,,x\n", "line 2", None, "fields"),
    # numbers beyond float64 (or that vanish in it): refused, not an OverflowError midway
    *(
        (
            f"sigma2-{v}",
            HEAD + f"State,t,1,discrete_gaussian,,{v},,,add_remove\n",
            "line 2",
            "sigma2",
            f"'{v}' is outside [1e-12, 1e12]",
        )
        for v in ("1e400", "1e-400", "5e-324", "1e13")
    ),
    ("rho-1e-13", HEAD + "State,t,1,discrete_gaussian,1e-13,,,,\n", "line 2", "rho", "outside"),
    ("scale-1e400", HEAD + "State,t,1,laplace,,,1e400,,add_remove\n", "line 2", "scale", "outside"),
    # str.isdigit() takes a superscript or an Arabic-Indic digit; int() does not
    ("cells-superscript", HEAD + "State,t,²,discrete_gaussian,1,,,,\n", "line 2", "cells", "'²'"),
    (
        "cells-arabic",
        HEAD + "State,t,\u0663,discrete_gaussian,1,,,,\n",
        "line 2",
        "cells",
        "digits",
    ),
    (
        "long-field",
        HEAD + "State," + "q" * 131_073 + ",1,discrete_gaussian,1,,,,\n",
        "line 2",
        None,
        "131,072 characters",
    ),
]


@pytest.mark.parametrize(
    ("text", "where", "column", "what"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_file_names_its_line_and_column(
    text: str, where: str, column: str | None, what: str
) -> None:
    with pytest.raises(DPAuditError) as info:
        parse_csv(text, "my.csv")
    msg = str(info.value)
    assert msg.startswith(f"Invalid allocation file 'my.csv', {where}"), msg
    if column is not None:
        assert f"column {column!r}" in msg, msg
    assert what in msg, msg


def test_bad_toml_names_its_entry() -> None:
    text = '[[query]]\ngeolevel = "State"\nquery = "t"\nmechanism = "dg"\nrho = 1\n'
    with pytest.raises(DPAuditError, match=r"\[\[query\]\] 1, column 'mechanism'"):
        parse_toml(text, "my.toml")


def test_sensitivity_is_bounded_before_any_work() -> None:
    head = "geolevel,query,mechanism,sigma2,sensitivity,neighbours\n"
    f = parse_csv(head + f"State,t,discrete_gaussian,4,{MAX_SENSITIVITY},add_remove\n", "x.csv")
    assert f.rows[0].sensitivity == MAX_SENSITIVITY
    text = head + "State,t,discrete_gaussian,4,1000000000000,add_remove\n"
    with pytest.raises(InvalidParameterError) as info:
        parse_csv(text, "x.csv")
    msg = str(info.value)
    assert "line 2, column 'sensitivity': 1,000,000,000,000 is above MAX_SENSITIVITY" in msg


def test_a_toml_file_nested_too_deeply_is_refused() -> None:
    text = "neighbours = " + "[" * 3000 + "]" * 3000 + "\n"
    with pytest.raises(InvalidParameterError, match=r"'my.toml', TOML: .*nested too deeply"):
        parse_toml(text, "my.toml")


def test_rho_read_exactly() -> None:
    f = parse_csv(HEAD + "State,t,1,discrete_gaussian,0.1,,,,\n", "x.csv")
    assert f.rows[0].value == Fraction(1, 10)


def test_the_shipped_example_is_the_guides_and_accounts_exactly() -> None:
    root = Path(__file__).resolve().parents[2]
    example = root / "examples" / "allocation_example.csv"
    text = example.read_text(encoding="utf-8")
    assert f"```csv\n{text}```" in (root / "docs" / "guide.md").read_text(encoding="utf-8")
    alloc = load_allocation(str(example))
    assert alloc.mechanisms() == ("discrete_gaussian", "geometric")
    out = account_json(["-a", str(example), "-d", "1e-10"])
    assert {lv["method"] for lv in [*out["levels"], out["composed"]]} == {"exact-lattice"}
    # State: ρ = 1/2 + 1/(2·8), one cell of each query moved under add/remove
    assert out["levels"][0]["rho"] == pytest.approx(0.5 + 1 / 16)
