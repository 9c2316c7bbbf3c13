"""The terminal tables of ``account`` and ``calibrate`` (their ``--json`` output is the dict
itself)."""

from __future__ import annotations

import math
from typing import Any


def value_key(method: str) -> str | None:
    if method in ("auto", "exact", "bracket"):
        return "exact"
    if method == "paper-bound":
        return "paper_bound"
    return None


def print_account(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    method = result.get("method", "auto")
    by_eps = bool(result.get("epsilons"))
    key = value_key(method)
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


def print_calibration(result: dict[str, Any]) -> None:
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
