"""``dpaudit tradeoff``: the f-DP trade-off curve β(α) of an allocation, certified exact bounds
next to the curve the Bureau's zCDP accounting implies, as CSV (12 significant digits, the bounds
rounded outward) or JSON (every digit)."""

from __future__ import annotations

import json
import math
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Annotated

import typer

from auditlib.exceptions import DPAuditError, InvalidParameterError
from flows.cli.accounting_results import select_levels
from flows.cli.checks import check_output_file
from flows.cli.errors import fail
from flows.cli.options import (
    AllocationOpt,
    CurveFormat,
    Neighbours,
    NeighboursOpt,
    OutputFileOption,
    OverwriteFileOption,
    RegionOpt,
    UniverseOpt,
)

#: most points of the even α grid: auditlib.accounting.tradeoff.MAX_TRADEOFF_POINTS, written out
#: here so that --help needs no import of the accountant (a test checks they agree)
MAX_POINTS = 100_000

#: the comment line that opens the CSV
CSV_COLUMNS = (
    "# columns: alpha = type I error; beta_lower <= beta(alpha) <= beta_upper = certified bounds "
    "of the exact type II error (rounded outward); beta_bureau = the curve the Bureau's zCDP "
    "accounting implies"
)

#: significant digits of the CSV's values
CSV_DIGITS = 12

#: what the curve of an allocation file with other noise than the discrete Gaussian is
MIXED_NOTE = (
    "; mixed mechanisms: the curve is the certified dual of the composition's privacy profile, "
    "beta(alpha) = sup_eps max(0, 1 - delta(eps) - e^eps alpha, e^-eps (1 - delta(eps) - alpha)); "
    "beta_lower errs on the safe side (at or below the true curve: a valid f-DP guarantee); "
    "rho = the zCDP the queries give (eps0^2/2 per cell of a pure eps0-DP geometric or Laplace "
    "query), beta_bureau the curve that rho implies"
)


def mechanism_names(comps: list[object]) -> list[str]:
    """The mechanisms of loss components, sorted (``GeometricLoss`` -> ``Geometric``)."""
    return sorted({type(c).__name__.removesuffix("Loss") for c in comps})


def digits(x: float, rounding: str = ROUND_HALF_EVEN) -> str:
    """``x`` to :data:`CSV_DIGITS` significant digits, rounded as ``rounding`` says, written as the
    shortest text that reads back as that value (ROUND_FLOOR: never above ``x``; ROUND_CEILING:
    never below)."""
    if x == 0 or not math.isfinite(x):
        return repr(x)
    d = Decimal(x)
    quantum = Decimal(1).scaleb(d.adjusted() - CSV_DIGITS + 1)
    return repr(float(d.quantize(quantum, rounding=rounding)))


def write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` through a temporary file beside it: a write that fails midway (a full
    disk) leaves the file that was there, whole."""
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


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
        int | None,
        typer.Option(
            "--points",
            help=f"Evenly spaced α grid on [0, 1], 2..{MAX_POINTS} points (default 101).",
        ),
    ] = None,
    fmt: Annotated[CurveFormat, typer.Option("--format", "-f", help="csv or json.")] = (
        CurveFormat.csv
    ),
    output: OutputFileOption = None,
    overwrite: OverwriteFileOption = False,
) -> None:
    """f-DP trade-off curve β(α): certified exact bounds next to the curve the Bureau's zCDP
    accounting implies.

    CSV (on stdout or in FILE): a '# columns:' comment line saying what the columns are, the header
    alpha,beta_lower,beta_upper,beta_bureau and one row per α. Values have at most 12 significant
    digits: beta_lower rounded down and beta_upper up, so the bracket stays certified; α and
    beta_bureau to the nearest. Read it with pandas.read_csv(FILE, comment='#'). JSON keeps every
    digit."""
    import numpy as np

    from auditlib.accounting import (
        DiscreteGaussianComposition,
        PrivacyLossComposition,
        gdp_mu_estimate,
        zcdp_tradeoff,
    )
    from auditlib.accounting import tradeoff as tradeoff_curve
    from auditlib.accounting.tradeoff import check_tradeoff_points
    from flows.cli.accounting_results import component_summary, level_components

    try:
        if alpha and points is not None:
            raise InvalidParameterError(
                "Invalid options: give either --alpha values or --points, not both"
            )
        if points is not None:
            check_tradeoff_points(points)
        for a in alpha or []:
            if not (0.0 <= a <= 1.0):
                raise InvalidParameterError(f"Invalid alpha: {a!r}; must be in [0, 1]")
        if output is not None:
            check_output_file(output, overwrite, "Invalid output", create=False)
        alloc, _ = select_levels(allocation, universe, region, [level] if level else None)
        even = [float(f"{a:.12g}") for a in np.linspace(0, 1, points or 101)]  # 0.3, not 0.3000…4
        grid = np.asarray(alpha or even, dtype=float)
        comps = level_components(alloc, neighbours.value, universe, region, level)
        mixed = not all(isinstance(c, tuple) for c in comps)
        comp: DiscreteGaussianComposition | PrivacyLossComposition
        if mixed:  # an allocation file with geometric, Laplace or Gaussian queries
            comp = PrivacyLossComposition(comps)
            rho = component_summary(comps)["rho"]
        else:
            comp = DiscreteGaussianComposition(list(comps))
            rho = comp.rho
        beta = tradeoff_curve(comp, grid)
        bureau = np.asarray(zcdp_tradeoff(rho, grid), dtype=float)
        mu = gdp_mu_estimate(comp, rho=rho)
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
                "rho": rho,
                "method": comp.method,
                "gdp_mu_estimate": mu,
                **({"mechanisms": mechanism_names(comps)} if mixed else {}),
                "note": "beta_lower <= exact beta(alpha) <= beta_upper (certified; beta_lower is a "
                "valid f-DP guarantee); beta_bureau = the curve implied by rho-zCDP through the "
                "Bureau's (eps, delta) conversion; gdp_mu_estimate = closest Gaussian-DP mu "
                "(an estimate, not a bound)" + (MIXED_NOTE if mixed else ""),
                "alpha": grid.tolist(),
                "beta_lower": lo.tolist(),
                "beta_upper": hi.tolist(),
                "beta_bureau": bureau.tolist(),
            },
            indent=2,
        )
    else:
        what = (
            f"{alloc.allocation_id}, {neighbours.value}, {universe}, {region}, "
            f"{level or 'all levels composed'}, method={comp.method}"
        )
        note = f"; {MIXED_NOTE.removeprefix('; ')}" if mixed else ""
        lines = [f"{CSV_COLUMNS}; {what}{note}", "alpha,beta_lower,beta_upper,beta_bureau"]
        lines += [
            f"{digits(a)},{digits(b0, ROUND_FLOOR)},{digits(b1, ROUND_CEILING)},{digits(bz)}"
            for a, b0, b1, bz in zip(
                grid.tolist(), lo.tolist(), hi.tolist(), bureau.tolist(), strict=True
            )
        ]
        text = "\n".join(lines)
    if output is None:
        typer.echo(text)
    else:
        write_atomically(output, text + "\n")
        typer.echo(f"{fmt.value}: {output} ({grid.size} points, method={comp.method})", err=True)
