"""``dpaudit account`` and ``dpaudit calibrate``: the accounting of the shipped allocations — exact
ε(δ) or δ(ε) next to the Bureau's zCDP conversion, and how much the noise could shrink."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import typer

from auditlib.exceptions import DPAuditError, InvalidParameterError
from flows.cli.accounting_results import (
    DEFAULT_ALLOCATION,
    account_cumulative,
    account_levels,
    check_deltas,
    check_epsilons,
    component_summary,
    grid_options,
    level_components,
    parse_target,
    select_levels,
)
from flows.cli.accounting_tables import print_account, print_calibration
from flows.cli.errors import fail
from flows.cli.options import (
    AccountMethod,
    AllocationOpt,
    AllocationsOpt,
    CalibrationMethod,
    LevelsOpt,
    Neighbours,
    NeighboursOpt,
    RegionOpt,
    UniverseOpt,
)


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
            "zcdp-simple (Bureau), zcdp-cks, paper-bound (Su, Su & Wang's δ ≤ P[L > ε]).",
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
    """Per-level exact ε(δ) (or δ(ε)) of an allocation next to the Bureau's zCDP conversion (an
    allocation file may mix discrete Gaussian, geometric, Laplace and Gaussian noise)."""
    try:
        grid_opts = grid_options(split_grid, max_work)
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
        check_deltas(deltas)
        check_epsilons(epsilon or [])
        if cumulative:
            from auditlib.allocations import RELEASED_PRODUCTS

            result = account_cumulative(
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
            alloc, levels = select_levels(first, universe, region, level)
            result = account_levels(
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
    _show(result, as_json, print_account)


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
            "--method", "-m", help="exact, or paper-bound (Su, Su & Wang's δ ≤ P[L > ε], labelled)."
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
    from auditlib.accounting import calibrate_factor

    try:
        check_deltas([delta])
        target_eps = parse_target(target)
        alloc, levels = select_levels(allocation, universe, region, level)

        def one(g: str | None) -> dict[str, Any]:
            comps = level_components(alloc, neighbours.value, universe, region, g)
            if all(isinstance(c, tuple) for c in comps):
                res = calibrate_factor(comps, delta, target_eps, method=method.value)
            else:
                res = _calibrate_mixed(comps, delta, target_eps, method.value)
            s2 = sorted({c[0] for c in comps if isinstance(c, tuple)})
            row: dict[str, Any] = {
                "geolevel": g or "all levels composed",
                "n_queries": len(comps),
                **component_summary(comps),
                **res.as_dict(),
            }
            if len(s2) == 1 and all(isinstance(c, tuple) for c in comps):
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
                "; paper-bound: Su, Su & Wang's delta(eps) <= P[L > eps], looser than exact"
                if method.value == "paper-bound"
                else ""
            ),
            "levels": [one(g) for g in levels],
        }
        if composed:
            out["composed"] = one(None)
    except DPAuditError as exc:
        fail(str(exc))
    _show(out, as_json, print_calibration)


def _show(result: Any, as_json: bool, print_table: Callable[[Any], None]) -> None:
    """``result`` as indented JSON (``--json``), else as ``print_table`` prints it."""
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        print_table(result)


def _calibrate_mixed(comps: list[Any], delta: float, target: float | None, method: str) -> Any:
    """The common variance factor of a mixed composition (an allocation file with geometric,
    Laplace or Gaussian queries); the 'bureau' target converts the zCDP its queries give."""
    from auditlib.accounting import bureau_epsilon, calibrate_mixed

    if method != "exact":
        raise InvalidParameterError(
            f"Invalid --method {method!r}: Su, Su & Wang's paper bound is of discrete Gaussian "
            "compositions; this allocation mixes mechanisms, so use --method exact"
        )
    if target is None:
        target = float(bureau_epsilon(component_summary(comps)["rho"], delta))
    return calibrate_mixed(comps, delta, target)
