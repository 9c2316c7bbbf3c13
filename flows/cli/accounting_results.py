"""What ``account`` and ``calibrate`` compute, as the JSON-ready dicts they print: the exact
bracket (or bound) of each level next to the zCDP conversions, and the checks of their options."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from auditlib.exceptions import InvalidParameterError

MODES = {"auto": "auto", "exact": "exact-lattice", "bracket": "bracket-grid"}

DEFAULT_ALLOCATION = "dhcp_20220825_paper"

METHOD_NOTES = {
    "auto": "exact = certified upper bound of the exact value (exact_lower <= truth <= exact_upper), "
    "on the exact lattice when the variances are commensurate, else on a rounded grid",
    "exact": "exact = certified upper bound of the exact value on the exact lattice "
    "(exact_lower <= truth <= exact_upper)",
    "bracket": "exact = certified upper bound from the grid-rounded (bracket) mode "
    "(exact_lower <= truth <= exact_upper)",
    "zcdp-simple": "value = the Bureau's rho + 2 sqrt(rho ln 1/delta) conversion of rho-zCDP",
    "zcdp-cks": "value = the Canonne-Kamath-Steinke conversion of rho-zCDP",
    "paper-bound": "paper_bound = Su, Su & Wang's delta(eps) <= P[L > eps] (drops the -e^eps Q[.] term): "
    "an upper bound on delta, looser than exact",
}


def bracket_entry(name: str, lower: Any, upper: Any) -> dict[str, float]:
    """JSON keys of a certified bracket: ``name`` (its conservative upper end), ``name_lower``,
    ``name_upper``."""
    return {name: float(upper), f"{name}_lower": float(lower), f"{name}_upper": float(upper)}


def check_deltas(deltas: list[float]) -> None:
    """Every δ in (0, 1), or :class:`InvalidParameterError` naming the first that is not."""
    for d in deltas:
        if not (math.isfinite(d) and 0 < d < 1):
            raise InvalidParameterError(
                f"Invalid delta: {d!r}; must be in (0, 1), e.g. --delta 1e-10"
            )


def check_epsilons(epsilons: list[float]) -> None:
    """Every ε finite and >= 0, or :class:`InvalidParameterError` naming the first that is not."""
    for e in epsilons:
        if not (math.isfinite(e) and e >= 0):
            raise InvalidParameterError(
                f"Invalid epsilon: {e!r}; must be finite and >= 0, e.g. --epsilon 10"
            )


def select_levels(
    allocation: str, universe: str, region: str, level: list[str] | None
) -> tuple[Any, list[str]]:
    """The allocation and the geolevels asked for (default: all of the universe and region);
    an unknown allocation or level raises, naming the allowed ones."""
    from auditlib.allocations import load_allocation

    alloc = load_allocation(allocation)
    levels = level or list(alloc.geolevels(universe, region))
    for g in levels:
        alloc.select(universe, region, g)  # raises on an unknown level
    return alloc, levels


def grid_options(split_grid: float | None, max_work: float) -> dict[str, Any]:
    """The accountant's grid budget from the CLI, checked here so a bad value fails before work."""
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


#: smallest ``--target`` ε: below it the calibrated noise needs lattices past any machine
MIN_TARGET_EPS = 1e-3


def parse_target(target: str) -> float | None:
    """``--target`` of calibrate: ``None`` for 'bureau', else a positive ε."""
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
    if value < MIN_TARGET_EPS:  # the noise scale grows like 1/target: the lattice past any memory
        raise InvalidParameterError(
            f"Invalid target: {target!r}; the smallest target epsilon calibrated is "
            f"{MIN_TARGET_EPS:g}, e.g. --target 20"
        )
    return value


def account_levels(
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
    """The rows of ``levels`` of one allocation (and, with ``composed``, all levels composed)."""

    def one(g: str | None) -> dict[str, Any]:
        comps = level_components(alloc, neighbours, universe, region, g)
        return level_row(comps, g or "all levels composed", deltas, method, epsilons, grid_opts)

    out: dict[str, Any] = {
        "allocation": alloc.allocation_id,
        "neighbours": neighbours,
        "universe": universe,
        "region": region,
        "method": method,
        "deltas": deltas if epsilons is None else [],
        "epsilons": epsilons or [],
        "note": METHOD_NOTES[method] + "; bureau = rho + 2 sqrt(rho ln 1/delta) (inverted for "
        "delta(eps)); cks = Canonne-Kamath-Steinke conversion of rho-zCDP",
        "levels": [one(g) for g in levels],
    }
    if composed:
        out["composed"] = one(None)
    out["note"] += _mixed_note([*out["levels"], out.get("composed", {})])
    return out


def _mixed_note(rows: list[dict[str, Any]]) -> str:
    """What ρ and σ² mean in rows of mixed mechanisms (an allocation file), else ''."""
    if not any("mechanisms" in r for r in rows):
        return ""
    return (
        "; rows with mechanisms: rho = the zCDP their queries give (eps0^2/2 per cell of a pure "
        "eps0-DP geometric or Laplace query), sigma2 = the noise variances"
    )


def level_components(
    alloc: Any, neighbours: str, universe: str, region: str, geolevel: str | None
) -> list[Any]:
    """The accountant's components of a selection: discrete Gaussian (σ², count) pairs when every
    query adds discrete Gaussian noise (the shipped allocations), else loss components of each
    mechanism (an allocation file with geometric, Laplace or Gaussian queries)."""
    queries = alloc.select(universe, region, geolevel)
    if all(q.mechanism == "discrete_gaussian" for q in queries):
        return list(alloc.components(neighbours, universe, region, geolevel))
    return list(alloc.losses(neighbours, universe, region, geolevel))


def component_summary(comps: list[Any]) -> dict[str, float]:
    """ρ (the zCDP the components give, composed) and the range of their noise variances."""
    from auditlib.summaries import zcdp_and_variance  # scipy: only when a table is computed

    zv = [zcdp_and_variance(c) for c in comps]
    s2 = [v for _, v in zv]
    return {
        "rho": float(sum((z for z, _ in zv), Fraction(0))),
        "sigma2_min": min(s2),
        "sigma2_max": max(s2),
    }


def _combined(parts: list[list[Any]]) -> list[Any]:
    """Components of several selections composed (sequentially): (σ², count) pairs while every
    part is discrete Gaussian, else loss components throughout."""
    from auditlib.accounting import DiscreteGaussianLoss

    flat = [c for part in parts for c in part]
    if all(isinstance(c, tuple) for c in flat):
        return flat
    return [DiscreteGaussianLoss(*c) if isinstance(c, tuple) else c for c in flat]


def account_cumulative(
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
    from auditlib.allocations import check_neighbours, load_allocation

    check_neighbours(neighbours)
    allocs = [load_allocation(a) for a in dict.fromkeys(allocation_ids)]  # unknown ids fail first
    rows = []
    everything: list[list[Any]] = []
    for alloc in allocs:
        a = alloc.allocation_id
        unis = [u for u in alloc.universes() if region in alloc.regions(u)]
        if not unis:
            alloc.geolevels(alloc.universes()[0], region)  # raises, naming the allowed regions
        per_universe = [level_components(alloc, neighbours, u, region, None) for u in unis]
        everything += per_universe
        for u, comps in zip(unis, per_universe, strict=True):
            rows.append(level_row(comps, f"{a} {u}", deltas, method, epsilons, grid_opts))
        if len(unis) > 1:
            comps = _combined(per_universe)
            rows.append(
                level_row(comps, f"{a} {'+'.join(unis)}", deltas, method, epsilons, grid_opts)
            )
    ids = list(dict.fromkeys(allocation_ids))
    if len(ids) > 1:
        comps = _combined(everything)
        rows.append(level_row(comps, "all products composed", deltas, method, epsilons, grid_opts))
    return {
        "allocation": " + ".join(ids),
        "allocations": ids,
        "neighbours": neighbours,
        "universe": "all",
        "region": region,
        "method": method,
        "deltas": deltas if epsilons is None else [],
        "epsilons": epsilons or [],
        "note": METHOD_NOTES[method] + "; sequential composition of every query of the products "
        "and universes in a row (as the Bureau totals rho); bureau = rho + 2 sqrt(rho ln 1/delta) "
        "(inverted for delta(eps)); cks = Canonne-Kamath-Steinke conversion of rho-zCDP"
        + _mixed_note(rows),
        "levels": rows,
    }


def level_row(
    comps: list[Any],
    label: str,
    deltas: list[float],
    method: str,
    epsilons: list[float] | None,
    grid_opts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One output row: the exact bracket (or bound) of ``comps`` next to the zCDP conversions.

    ``comps`` are discrete Gaussian (σ², count) pairs, or loss components of mixed mechanisms
    (accounted by :class:`~auditlib.accounting.PrivacyLossComposition`; their ρ is the zCDP each
    mechanism gives, ε₀²/2 per pure ε₀-DP release, and ``sigma2`` the noise variances)."""
    import numpy as np

    from auditlib.accounting import (
        DiscreteGaussianComposition,
        PrivacyLossComposition,
        bureau_delta,
        bureau_epsilon,
        cks_delta,
        cks_epsilon,
        paper_bound_epsilon,
        tail_probability,
    )

    summary = component_summary(comps)
    rho = summary["rho"]
    mixed = not all(isinstance(c, tuple) for c in comps)
    row: dict[str, Any] = {"geolevel": label, "n_queries": len(comps), **summary}
    if mixed:
        row["mechanisms"] = sorted({type(c).__name__.removesuffix("Loss") for c in comps})
    comp: Any = None  # DiscreteGaussianComposition, or PrivacyLossComposition when mixed
    if method in ("auto", "exact", "bracket", "paper-bound") and mixed:
        opts = dict(grid_opts or {})
        if opts.pop("split_grid", None) is not None:
            raise InvalidParameterError(
                "Invalid option: --split-grid splits discrete Gaussian variances; this allocation "
                "mixes mechanisms, so drop --split-grid"
            )
        comp = PrivacyLossComposition(
            list(comps),
            mode=MODES.get(method, "auto"),  # type: ignore[arg-type]
            **opts,
        )
        row["method"] = comp.method
    elif method in ("auto", "exact", "bracket", "paper-bound"):
        comp = DiscreteGaussianComposition(
            list(comps),
            mode=MODES.get(method, "auto"),  # type: ignore[arg-type]
            **(grid_opts or {}),
        )
        row["method"] = comp.method
    else:
        row["method"] = method
    exact = comp is not None and method != "paper-bound"
    brackets: list[dict[str, float]] | None = None
    if epsilons is not None:
        e = np.asarray(epsilons, dtype=float)
        bureau, cks = bureau_delta(rho, e), cks_delta(rho, e)
        if exact:
            brackets = [bracket_entry("exact", b.lower, b.upper) for b in map(comp.delta, epsilons)]
        elif comp is not None:
            tails = (tail_probability(comp, eps) for eps in epsilons)
            brackets = [bracket_entry("paper_bound", b.lower, b.upper) for b in tails]
        row["delta"] = _entries("epsilon", epsilons, brackets, bureau, cks)
        return row
    d = np.asarray(deltas, dtype=float)
    bureau, cks = bureau_epsilon(rho, d), cks_epsilon(rho, d)
    if exact:
        ex = comp.epsilon(d)
        lo, hi = np.atleast_1d(ex.lower), np.atleast_1d(ex.upper)
        brackets = [bracket_entry("exact", lo[i], hi[i]) for i in range(len(deltas))]
    elif comp is not None:
        bounds = (paper_bound_epsilon(comp, dd) for dd in deltas)
        brackets = [bracket_entry("paper_bound", b.lower, b.upper) for b in bounds]
    row["epsilon"] = _entries("delta", deltas, brackets, bureau, cks)
    return row


def _entries(
    key: str, values: list[float], brackets: list[dict[str, float]] | None, bureau: Any, cks: Any
) -> list[dict[str, Any]]:
    """One output entry per ε (``key`` "epsilon") or δ (``key`` "delta"): its certified bracket's
    keys (:func:`bracket_entry`) when there is one, then the Bureau's and CKS's conversions."""
    import numpy as np

    bu, ck = (np.atleast_1d(np.asarray(a, dtype=float)) for a in (bureau, cks))
    return [
        {
            key: v,
            **(brackets[i] if brackets is not None else {}),
            "bureau": float(bu[i]),
            "cks": float(ck[i]),
        }
        for i, v in enumerate(values)
    ]
