"""``dpaudit account``, ``calibrate`` and ``tradeoff``: accounting of the shipped allocations."""

from __future__ import annotations

import json
import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from auditlib.exceptions import DPAuditError, InvalidParameterError
from flows.cli.options import Neighbours, app, fail

# options the accounting commands share
AllocationOpt = Annotated[str, typer.Option("--allocation", "-a", help="Shipped allocation id.")]
NeighboursOpt = Annotated[
    Neighbours, typer.Option("--neighbours", "-n", help="Neighbour relation.")
]
AllocationsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allocation",
        "-a",
        help="Shipped allocation id; repeat it (or give --cumulative) to compose products.",
    ),
]
UniverseOpt = Annotated[str, typer.Option(help="persons | units.")]
RegionOpt = Annotated[str, typer.Option(help="US | PR.")]
LevelsOpt = Annotated[
    list[str] | None, typer.Option("--level", "-l", help="Geolevel(s); default: all.")
]


class AccountMethod(StrEnum):
    auto = "auto"
    exact = "exact"
    bracket = "bracket"
    zcdp_simple = "zcdp-simple"
    zcdp_cks = "zcdp-cks"
    paper_bound = "paper-bound"


class CalibrationMethod(StrEnum):
    exact = "exact"
    paper_bound = "paper-bound"


class CurveFormat(StrEnum):
    csv = "csv"
    json = "json"


_MODES = {"auto": "auto", "exact": "exact-lattice", "bracket": "bracket-grid"}

DEFAULT_ALLOCATION = "dhcp_20220825_paper"

_METHOD_NOTES = {
    "auto": "exact = certified upper bound of the exact value (exact_lower <= truth <= exact_upper), "
    "on the exact lattice when the variances are commensurate, else on a rounded grid",
    "exact": "exact = certified upper bound of the exact value on the exact lattice "
    "(exact_lower <= truth <= exact_upper)",
    "bracket": "exact = certified upper bound from the grid-rounded (bracket) mode "
    "(exact_lower <= truth <= exact_upper)",
    "zcdp-simple": "value = the Bureau's rho + 2 sqrt(rho ln 1/delta) conversion of rho-zCDP",
    "zcdp-cks": "value = the Canonne-Kamath-Steinke conversion of rho-zCDP",
    "paper-bound": "paper_bound = seed 004's delta(eps) <= P[L > eps] (drops the -e^eps Q[.] term): "
    "an upper bound on delta, looser than exact",
}


def _bracket_entry(name: str, lower: Any, upper: Any) -> dict[str, float]:
    """JSON keys of a certified bracket: ``name`` (its conservative upper end), ``name_lower``,
    ``name_upper``."""
    return {name: float(upper), f"{name}_lower": float(lower), f"{name}_upper": float(upper)}


def _check_deltas(deltas: list[float]) -> None:
    for d in deltas:
        if not (math.isfinite(d) and 0 < d < 1):
            raise InvalidParameterError(
                f"Invalid delta: {d!r}; must be in (0, 1), e.g. --delta 1e-10"
            )


def _check_epsilons(epsilons: list[float]) -> None:
    for e in epsilons:
        if not (math.isfinite(e) and e >= 0):
            raise InvalidParameterError(
                f"Invalid epsilon: {e!r}; must be finite and >= 0, e.g. --epsilon 10"
            )


def _select_levels(
    allocation: str, universe: str, region: str, level: list[str] | None
) -> tuple[Any, list[str]]:
    from auditlib.allocations import load_allocation

    alloc = load_allocation(allocation)
    levels = level or list(alloc.geolevels(universe, region))
    for g in levels:
        alloc.select(universe, region, g)  # raises on an unknown level
    return alloc, levels


@app.command()
def account(
    allocation: AllocationsOpt = None,
    neighbours: NeighboursOpt = Neighbours.add_remove,
    universe: UniverseOpt = "persons",
    region: RegionOpt = "US",
    level: LevelsOpt = None,
    delta: Annotated[
        list[float] | None, typer.Option("--delta", "-d", help="δ value(s) in (0, 1).")
    ] = None,
    epsilon: Annotated[
        list[float] | None,
        typer.Option("--epsilon", "-e", help="ε value(s) ≥ 0: give δ(ε) instead of ε(δ)."),
    ] = None,
    method: Annotated[
        AccountMethod,
        typer.Option(
            "--method",
            "-m",
            help="auto (exact lattice if commensurate, else bracket), exact, bracket, "
            "zcdp-simple (Bureau), zcdp-cks, paper-bound (seed 004's δ ≤ P[L > ε]).",
        ),
    ] = AccountMethod.auto,
    composed: Annotated[
        bool, typer.Option("--composed/--no-composed", help="Also all levels composed.")
    ] = True,
    cumulative: Annotated[
        bool,
        typer.Option(
            "--cumulative",
            help="Compose whole products instead of listing levels: each universe, persons + "
            "units, and all given products together (default products: PL94-171 2021 and DHC "
            "2023; implied when --allocation is repeated).",
        ),
    ] = False,
    split_grid: Annotated[
        float | None,
        typer.Option(
            "--split-grid",
            help="Bracket mode: the dyadic grid step of the σ² split (e.g. 6.103515625e-05 = "
            "2^-14); finer narrows the bracket at more cost. Default: the finest within "
            "--max-work.",
        ),
    ] = None,
    max_work: Annotated[
        float,
        typer.Option(
            "--max-work",
            help="Budget of the exact/bracket accountant in multiply-adds (e.g. 2e10 for "
            "PL94+DHC cumulative at 1e-6 width).",
        ),
    ] = 5e9,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Per-level exact ε(δ) (or δ(ε)) of a shipped allocation next to the Bureau's zCDP conversion."""
    try:
        grid_opts = _grid_options(split_grid, max_work)
        ids = allocation or []
        cumulative = cumulative or len(ids) > 1
        if cumulative and level:
            raise InvalidParameterError(
                "Invalid options: --cumulative composes whole products; drop --level"
            )
        if delta and epsilon:
            raise InvalidParameterError(
                "Invalid options: give either --delta (for ε(δ)) or --epsilon (for δ(ε)), not both"
            )
        deltas = delta or [1e-5, 1e-10, 1e-11]
        _check_deltas(deltas)
        _check_epsilons(epsilon or [])
        if cumulative:
            from auditlib.allocations import RELEASED_PRODUCTS

            result = _account_cumulative(
                ids or list(RELEASED_PRODUCTS),
                neighbours.value,
                region,
                deltas,
                method=method.value,
                epsilons=epsilon,
                grid_opts=grid_opts,
            )
        else:
            first = ids[0] if ids else DEFAULT_ALLOCATION
            alloc, levels = _select_levels(first, universe, region, level)
            result = _account(
                alloc,
                neighbours.value,
                universe,
                region,
                levels,
                deltas,
                composed,
                method=method.value,
                epsilons=epsilon,
                grid_opts=grid_opts,
            )
    except DPAuditError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    _print_account(result)


def _grid_options(split_grid: float | None, max_work: float) -> dict[str, Any]:
    """The accountant's grid budget from the CLI, checked here so a bad value fails before work."""
    import math

    if not (math.isfinite(max_work) and max_work > 0):
        raise InvalidParameterError(
            f"Invalid --max-work {max_work!r}: give a positive number of multiply-adds, e.g. 2e10"
        )
    out: dict[str, Any] = {"max_work": max_work}
    if split_grid is not None:
        m, _ = math.frexp(split_grid) if math.isfinite(split_grid) else (0.0, 0)
        if not (0 < split_grid < 1 and m == 0.5):
            raise InvalidParameterError(
                f"Invalid --split-grid {split_grid!r}: give a power of two in (0, 1), "
                "e.g. 6.103515625e-05 (2^-14)"
            )
        out["split_grid"] = split_grid
    return out


def _account(
    alloc: Any,
    neighbours: str,
    universe: str,
    region: str,
    levels: list[str],
    deltas: list[float],
    composed: bool,
    *,
    method: str = "auto",
    epsilons: list[float] | None = None,
    grid_opts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    def one(g: str | None) -> dict[str, Any]:
        comps = alloc.components(neighbours, universe, region, g)
        return _row(comps, g or "all levels composed", deltas, method, epsilons, grid_opts)

    out: dict[str, Any] = {
        "allocation": alloc.allocation_id,
        "neighbours": neighbours,
        "universe": universe,
        "region": region,
        "method": method,
        "deltas": deltas if epsilons is None else [],
        "epsilons": epsilons or [],
        "note": _METHOD_NOTES[method] + "; bureau = rho + 2 sqrt(rho ln 1/delta) (inverted for "
        "delta(eps)); cks = Canonne-Kamath-Steinke conversion of rho-zCDP",
        "levels": [one(g) for g in levels],
    }
    if composed:
        out["composed"] = one(None)
    return out


def _account_cumulative(
    allocation_ids: list[str],
    neighbours: str,
    region: str,
    deltas: list[float],
    *,
    method: str = "auto",
    epsilons: list[float] | None = None,
    grid_opts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Whole products composed: each universe, persons + units per product, all products."""
    from auditlib.allocations import cumulative_components, load_allocation

    allocs = [load_allocation(a) for a in dict.fromkeys(allocation_ids)]  # unknown ids fail first
    rows = []
    for alloc in allocs:
        a = alloc.allocation_id
        unis = [u for u in alloc.universes() if region in alloc.regions(u)]
        if not unis:
            alloc.regions(alloc.universes()[0])  # names the allowed regions
        for u in unis:
            rows.append(
                _row(
                    alloc.components(neighbours, u, region),
                    f"{a} {u}",
                    deltas,
                    method,
                    epsilons,
                    grid_opts,
                )
            )
        if len(unis) > 1:
            comps = cumulative_components([a], neighbours, region, unis)
            rows.append(_row(comps, f"{a} {'+'.join(unis)}", deltas, method, epsilons, grid_opts))
    ids = list(dict.fromkeys(allocation_ids))
    if len(ids) > 1:
        comps = cumulative_components(ids, neighbours, region)
        rows.append(_row(comps, "all products composed", deltas, method, epsilons, grid_opts))
    return {
        "allocation": " + ".join(ids),
        "allocations": ids,
        "neighbours": neighbours,
        "universe": "all",
        "region": region,
        "method": method,
        "deltas": deltas if epsilons is None else [],
        "epsilons": epsilons or [],
        "note": _METHOD_NOTES[method] + "; sequential composition of every query of the products "
        "and universes in a row (as the Bureau totals rho); bureau = rho + 2 sqrt(rho ln 1/delta) "
        "(inverted for delta(eps)); cks = Canonne-Kamath-Steinke conversion of rho-zCDP",
        "levels": rows,
    }


def _value_key(method: str) -> str | None:
    if method in ("auto", "exact", "bracket"):
        return "exact"
    if method == "paper-bound":
        return "paper_bound"
    return None


def _print_account(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    method = result.get("method", "auto")
    by_eps = bool(result.get("epsilons"))
    key = _value_key(method)
    label = {"exact": "exact", "paper_bound": "paper bound"}.get(key or "", "")
    sym, points = ("δ", result["epsilons"]) if by_eps else ("ε", result["deltas"])
    at = "ε" if by_eps else "δ"
    t = Table(
        title=f"{result['allocation']} · {result['universe']} · {result['region']} · "
        f"neighbours={result['neighbours']}"
    )
    t.add_column("geolevel")
    t.add_column("ρ", justify="right")
    t.add_column("σ²", justify="right")
    for x in points:
        if method != "zcdp-cks":
            t.add_column(f"Bureau {sym} @{at}={x:g}", justify="right")
        if method == "zcdp-cks":
            t.add_column(f"CKS {sym} @{at}={x:g}", justify="right")
        if key:
            t.add_column(f"{label} {sym} @{at}={x:g}", justify="right")
    t.add_column("method")
    rows = [*result["levels"], *([result["composed"]] if "composed" in result else [])]
    for r in rows:
        s2 = (
            f"{r['sigma2_min']:.2f}"
            if math.isclose(r["sigma2_min"], r["sigma2_max"])
            else f"{r['sigma2_min']:.2f}–{r['sigma2_max']:.2f}"
        )
        cells = [r["geolevel"], f"{r['rho']:.4f}", s2]
        for e in r["delta" if by_eps else "epsilon"]:
            fmt = "{:.4g}" if by_eps else "{:.3f}"
            cells.append(fmt.format(e["cks" if method == "zcdp-cks" else "bureau"]))
            if key:
                lo, hi = e[f"{key}_lower"], e[f"{key}_upper"]
                if by_eps:
                    cells.append(f"{hi:.6g}" if hi - lo <= 1e-6 * hi else f"[{lo:.4g}, {hi:.4g}]")
                else:
                    cells.append(f"{hi:.6f}" if hi - lo < 5e-7 else f"[{lo:.4f}, {hi:.4f}]")
        cells.append(r["method"])
        t.add_row(*cells)
    Console().print(t)
    Console().print(
        f"{label or method} {sym}: certified to the digits shown, or a certified bracket; "
        "--json gives both ends."
        if key
        else f"{method}: a conversion of ρ-zCDP (an upper bound, not the exact value)."
    )


def _parse_target(target: str) -> float | None:
    if target.strip().lower() == "bureau":
        return None
    try:
        value = float(target)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise InvalidParameterError(
            f"Invalid target: {target!r}; give 'bureau' or a positive epsilon, e.g. --target 20"
        )
    return value


@app.command()
def calibrate(
    allocation: AllocationOpt = "dhcp_20220825_paper",
    neighbours: NeighboursOpt = Neighbours.add_remove,
    universe: UniverseOpt = "persons",
    region: RegionOpt = "US",
    level: LevelsOpt = None,
    delta: Annotated[float, typer.Option("--delta", "-d", help="δ* in (0, 1).")] = 1e-10,
    target: Annotated[
        str,
        typer.Option(
            "--target",
            "-t",
            help="ε to match at δ*: 'bureau' (ρ + 2√(ρ ln 1/δ*) of each row's ρ) or a number.",
        ),
    ] = "bureau",
    method: Annotated[
        CalibrationMethod,
        typer.Option(
            "--method", "-m", help="exact, or paper-bound (seed 004's δ ≤ P[L > ε], labelled)."
        ),
    ] = CalibrationMethod.exact,
    composed: Annotated[
        bool,
        typer.Option("--composed/--no-composed", help="Also the common factor of all levels."),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """How much the noise variance could shrink with ε(δ*) still at the target: per level and as
    one common factor for all levels (certified intervals)."""
    from fractions import Fraction

    from auditlib.accounting import calibrate_factor

    try:
        _check_deltas([delta])
        target_eps = _parse_target(target)
        alloc, levels = _select_levels(allocation, universe, region, level)

        def one(g: str | None) -> dict[str, Any]:
            comps = alloc.components(neighbours.value, universe, region, g)
            res = calibrate_factor(comps, delta, target_eps, method=method.value)
            s2 = sorted({s for s, _ in comps})
            row: dict[str, Any] = {
                "geolevel": g or "all levels composed",
                "n_queries": len(comps),
                "rho": float(sum(Fraction(c) / (2 * s) for s, c in comps)),
                "sigma2_min": float(s2[0]),
                "sigma2_max": float(s2[-1]),
                **res.as_dict(),
            }
            if len(s2) == 1:
                b = res.sigma2(s2[0])
                row["reduced_sigma2_lower"] = float(b.lower)
                row["reduced_sigma2_upper"] = float(b.upper)
            return row

        out: dict[str, Any] = {
            "allocation": alloc.allocation_id,
            "neighbours": neighbours.value,
            "universe": universe,
            "region": region,
            "delta": delta,
            "target": target,
            "method": method.value,
            "note": "every sigma2 times factor keeps eps(delta) at target_epsilon; the true factor "
            "lies in [factor_lower, factor_upper]; variance_cut = 1 - factor"
            + (
                "; paper-bound: seed 004's delta(eps) <= P[L > eps], looser than exact"
                if method.value == "paper-bound"
                else ""
            ),
            "levels": [one(g) for g in levels],
        }
        if composed:
            out["composed"] = one(None)
    except DPAuditError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    _print_calibration(out)


def _print_calibration(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(
        title=f"{result['allocation']} · {result['universe']} · {result['region']} · "
        f"neighbours={result['neighbours']} · δ*={result['delta']:g} · method={result['method']}"
    )
    for name in ("geolevel", "ρ", "σ²", "target ε", "reduced σ²", "variance cut", "accounting"):
        t.add_column(name, justify="left" if name in ("geolevel", "accounting") else "right")
    rows = [*result["levels"], *([result["composed"]] if "composed" in result else [])]
    for r in rows:
        s2 = (
            f"{r['sigma2_min']:.2f}"
            if math.isclose(r["sigma2_min"], r["sigma2_max"])
            else f"{r['sigma2_min']:.2f}–{r['sigma2_max']:.2f}"
        )
        reduced = (
            f"{0.5 * (r['reduced_sigma2_lower'] + r['reduced_sigma2_upper']):.4f}"
            if "reduced_sigma2_lower" in r
            else f"× {0.5 * (r['factor_lower'] + r['factor_upper']):.6f}"
        )
        cut = 50 * (r["variance_cut_lower"] + r["variance_cut_upper"])
        t.add_row(
            r["geolevel"],
            f"{r['rho']:.4f}",
            s2,
            f"{r['target_epsilon']:.5f}",
            reduced,
            f"{cut:.2f} %",
            r["accounting"],
        )
    Console().print(t)
    Console().print(
        "certified: the exact factor lies in \\[factor_lower, factor_upper] (--json); "
        "the digits shown are within that interval."
    )


@app.command()
def tradeoff(
    allocation: AllocationOpt = "dhcp_20220825_paper",
    neighbours: NeighboursOpt = Neighbours.add_remove,
    universe: UniverseOpt = "persons",
    region: RegionOpt = "US",
    level: Annotated[
        str | None,
        typer.Option("--level", "-l", help="One geolevel; default: all levels composed."),
    ] = None,
    alpha: Annotated[
        list[float] | None, typer.Option("--alpha", help="Type I error value(s) in [0, 1].")
    ] = None,
    points: Annotated[
        int | None, typer.Option("--points", help="Evenly spaced α grid on [0, 1] (default 101).")
    ] = None,
    fmt: Annotated[CurveFormat, typer.Option("--format", "-f", help="csv or json.")] = (
        CurveFormat.csv
    ),
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to FILE instead of stdout.")
    ] = None,
) -> None:
    """f-DP trade-off curve β(α): certified exact bounds next to the curve the Bureau's zCDP
    accounting implies."""
    import numpy as np

    from auditlib.accounting import (
        DiscreteGaussianComposition,
        gdp_mu_estimate,
        zcdp_tradeoff,
    )
    from auditlib.accounting import tradeoff as tradeoff_curve

    try:
        if alpha and points is not None:
            raise InvalidParameterError(
                "Invalid options: give either --alpha values or --points, not both"
            )
        if points is not None and points < 2:
            raise InvalidParameterError(f"Invalid points: {points!r}; must be >= 2")
        for a in alpha or []:
            if not (0.0 <= a <= 1.0):
                raise InvalidParameterError(f"Invalid alpha: {a!r}; must be in [0, 1]")
        if output is not None and not output.parent.is_dir():
            raise InvalidParameterError(
                f"Invalid output: {str(output)!r}; directory {str(output.parent)!r} not found"
            )
        alloc, _ = _select_levels(allocation, universe, region, [level] if level else None)
        grid = np.asarray(alpha, dtype=float) if alpha else np.linspace(0, 1, points or 101)
        comps = alloc.components(neighbours.value, universe, region, level)
        comp = DiscreteGaussianComposition(list(comps))
        beta = tradeoff_curve(comp, grid)
        bureau = np.asarray(zcdp_tradeoff(comp.rho, grid), dtype=float)
        mu = gdp_mu_estimate(comp)
    except DPAuditError as exc:
        fail(str(exc))
    lo = np.atleast_1d(np.asarray(beta.lower, dtype=float))
    hi = np.atleast_1d(np.asarray(beta.upper, dtype=float))
    if fmt is CurveFormat.json:
        text = json.dumps(
            {
                "allocation": alloc.allocation_id,
                "neighbours": neighbours.value,
                "universe": universe,
                "region": region,
                "geolevel": level or "all levels composed",
                "rho": comp.rho,
                "method": comp.method,
                "gdp_mu_estimate": mu,
                "note": "beta_lower <= exact beta(alpha) <= beta_upper (certified; beta_lower is a "
                "valid f-DP guarantee); beta_bureau = the curve implied by rho-zCDP through the "
                "Bureau's (eps, delta) conversion; gdp_mu_estimate = closest Gaussian-DP mu "
                "(an estimate, not a bound)",
                "alpha": grid.tolist(),
                "beta_lower": lo.tolist(),
                "beta_upper": hi.tolist(),
                "beta_bureau": bureau.tolist(),
            },
            indent=2,
        )
    else:
        lines = ["alpha,beta_lower,beta_upper,beta_bureau"]
        lines += [
            f"{a!r},{b0!r},{b1!r},{bz!r}"
            for a, b0, b1, bz in zip(
                grid.tolist(), lo.tolist(), hi.tolist(), bureau.tolist(), strict=True
            )
        ]
        text = "\n".join(lines)
    if output is None:
        typer.echo(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")
        typer.echo(f"{fmt.value}: {output} ({grid.size} points, method={comp.method})", err=True)


def _row(
    comps: list[Any],
    label: str,
    deltas: list[float],
    method: str,
    epsilons: list[float] | None,
    grid_opts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One output row: the exact bracket (or bound) of ``comps`` next to the zCDP conversions."""
    from fractions import Fraction

    import numpy as np

    from auditlib.accounting import (
        DiscreteGaussianComposition,
        bureau_delta,
        bureau_epsilon,
        cks_delta,
        cks_epsilon,
        paper_bound_epsilon,
        tail_probability,
    )

    rho = float(sum(Fraction(c) / (2 * s) for s, c in comps))
    s2 = [float(s) for s, _ in comps]
    row: dict[str, Any] = {
        "geolevel": label,
        "n_queries": len(comps),
        "rho": rho,
        "sigma2_min": min(s2),
        "sigma2_max": max(s2),
    }
    comp = None
    if method in ("auto", "exact", "bracket", "paper-bound"):
        comp = DiscreteGaussianComposition(
            list(comps),
            mode=_MODES.get(method, "auto"),  # type: ignore[arg-type]
            **(grid_opts or {}),
        )
        row["method"] = comp.method
    else:
        row["method"] = method
    if epsilons is not None:
        e = np.asarray(epsilons, dtype=float)
        bd = np.atleast_1d(np.asarray(bureau_delta(rho, e), dtype=float))
        cd = np.atleast_1d(np.asarray(cks_delta(rho, e), dtype=float))
        entries = []
        for i, eps in enumerate(epsilons):
            entry: dict[str, Any] = {"epsilon": eps}
            if comp is not None and method != "paper-bound":
                b = comp.delta(eps)
                entry |= _bracket_entry("exact", b.lower, b.upper)
            elif comp is not None:
                b = tail_probability(comp, eps)
                entry |= _bracket_entry("paper_bound", b.lower, b.upper)
            entry |= {"bureau": float(bd[i]), "cks": float(cd[i])}
            entries.append(entry)
        row["delta"] = entries
        return row
    d = np.asarray(deltas, dtype=float)
    be = np.atleast_1d(np.asarray(bureau_epsilon(rho, d), dtype=float))
    ce = np.atleast_1d(np.asarray(cks_epsilon(rho, d), dtype=float))
    exact = comp.epsilon(d) if comp is not None and method != "paper-bound" else None
    entries = []
    for i, dd in enumerate(deltas):
        entry = {"delta": dd}
        if exact is not None:
            lo, hi = np.atleast_1d(exact.lower), np.atleast_1d(exact.upper)
            entry |= _bracket_entry("exact", lo[i], hi[i])
        elif comp is not None:
            b = paper_bound_epsilon(comp, dd)
            entry |= _bracket_entry("paper_bound", b.lower, b.upper)
        entry |= {"bureau": float(be[i]), "cks": float(ce[i])}
        entries.append(entry)
    row["epsilon"] = entries
    return row
