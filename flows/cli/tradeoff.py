"""``dpaudit tradeoff``: the f-DP trade-off curve β(α) of an allocation, certified exact bounds
next to the curve the Bureau's zCDP accounting implies, as CSV or JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from auditlib.exceptions import DPAuditError, InvalidParameterError
from flows.cli.accounting_results import select_levels
from flows.cli.errors import fail
from flows.cli.options import (
    AllocationOpt,
    CurveFormat,
    Neighbours,
    NeighboursOpt,
    RegionOpt,
    UniverseOpt,
)


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
        alloc, _ = select_levels(allocation, universe, region, [level] if level else None)
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
