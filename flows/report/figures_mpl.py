"""Plot-ready MPL figures: pure functions from a stored dataset to a matplotlib Figure.

* :func:`coverage_ecdf_figure` — from an ``mpl_coverage`` group (``dpaudit mpl-coverage``): the
  empirical CDF of LB per mechanism, one curve per ε₀, with ε*_C (dashed) and the claim ε₀ (dotted)
  marked, as in Askin, Kutta & Dette's Figure 4. Coverage is the height of a curve at its dashed line. A bound
  at or below 0 says nothing (:mod:`flows.report.mpl_bound`): the curves start at 0, with a step
  there of the share of vacuous bounds.
* :func:`loss_curve_figure` — from an audit store's ``mpl`` group: per geolevel, the step-1 loss
  curves ℓ̂(t) of every pair (D vs D′) over C, with t̂ marked, LB (at 0 and named vacuous when at
  or below 0) and the exact ε*_C as horizontal lines, and the guard-rail flags in the title.
* :func:`fdp_figure` — from an audit store's ``mpl`` group with its f-DP variables: per geolevel
  the certified exact trade-off curve and the Bureau-implied one (copied from the ``accounting``
  group), the count's certified empirical points and the band between the exact curve and their
  hull, where the count's true curve lies (with probability ≥ 1 − α).

Figures are built with the object API (no pyplot state), so they render under any backend and in
worker processes; save them with ``fig.savefig(path)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from auditlib.exceptions import InvalidParameterError
from auditlib.mpl.tradeoff_geometry import hull_curve
from flows.report.mpl_bound import VACUOUS, shown, vacuous
from storage import schema as S


def _grid(n: int, cols: int) -> tuple[int, int]:
    c = max(1, min(cols, n))
    return (n + c - 1) // c, c


def _need(ds: xr.Dataset, names: tuple[str, ...], what: str) -> None:
    missing = [v for v in names if v not in ds.variables]
    if missing:
        raise InvalidParameterError(
            f"Invalid dataset for {what}: missing {', '.join(missing)}; pass the store's "
            f"{what.split()[0]} group."
        )


def coverage_ecdf_figure(ds: xr.Dataset, *, cols: int = 3) -> Figure:
    """eCDFs of LB per mechanism × ε₀ from an ``mpl_coverage`` group (Askin, Kutta & Dette, Fig. 4)."""
    _need(ds, ("lb", "epsilon_c", "coverage"), "mpl_coverage figure")
    mechs = [str(m) for m in ds["mechanism"].values]
    eps0 = np.asarray(ds["epsilon0"].values, dtype=float)
    rows, c = _grid(len(mechs), cols)
    fig = Figure(figsize=(4.0 * c, 3.2 * rows), layout="constrained")
    axes = fig.subplots(rows, c, squeeze=False)
    colors = [f"C{i}" for i in range(len(eps0))]
    for k, name in enumerate(mechs):
        ax: Any = axes[k // c][k % c]
        for j, e0 in enumerate(eps0):
            lb = np.asarray(ds["lb"].values[k, j], dtype=float)
            lb = np.sort(np.maximum(lb[np.isfinite(lb)], 0.0))  # at or below 0: vacuous, at 0
            if lb.size == 0:
                continue
            y = np.arange(1, lb.size + 1) / lb.size
            cov = float(ds["coverage"].values[k, j])
            ax.step(lb, y, where="post", color=colors[j], label=f"ε₀ = {e0:g} (cov. {cov:.2f})")
            ec = float(ds["epsilon_c"].values[k, j])
            if np.isfinite(ec):
                ax.axvline(ec, color=colors[j], linestyle="--", linewidth=0.9)
            claim = float(ds["claimed_epsilon"].values[k, j]) if "claimed_epsilon" in ds else e0
            if np.isfinite(claim):  # the discrete Gaussian claims no pure ε
                ax.axvline(claim, color=colors[j], linestyle=":", linewidth=0.9)
        ax.set_title(name)
        ax.set_xlabel("LB")
        ax.set_ylabel("eCDF")
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize="small", loc="lower right")
    for k in range(len(mechs), rows * c):
        axes[k // c][k % c].set_visible(False)
    alpha = ds.attrs.get("alpha", "")
    # two lines: one panel (4 in) is narrower than the title on one line
    fig.suptitle(
        f"MPL lower bounds: eCDF over repetitions (α = {alpha})\ndashed ε*_C, dotted the claimed ε",
        fontsize="medium",
    )
    return fig


def loss_curve_figure(
    ds: xr.Dataset, *, geolevels: list[str] | None = None, cols: int = 2
) -> Figure:
    """Loss curves ℓ̂(t) per geolevel and pair with t̂, LB and ε*_C, from an audit's ``mpl`` group."""
    _need(ds, ("loss_curve", "loss_t", "lb", "eps_hat", "t_hat", "epsilon_c"), "mpl figure")
    levels = [str(g) for g in ds[S.GEOLEVEL].values]
    chosen = levels if geolevels is None else list(geolevels)
    for g in chosen:
        if g not in levels:
            raise InvalidParameterError(
                f"Invalid geolevel: {g!r}; the mpl group holds {', '.join(levels)}"
            )
    pairs = [str(p) for p in ds[S.MPL_PAIR].values]
    rows, c = _grid(len(chosen), cols)
    fig = Figure(figsize=(5.0 * c, 3.4 * rows), layout="constrained")
    axes = fig.subplots(rows, c, squeeze=False)
    for k, g in enumerate(chosen):
        ax: Any = axes[k // c][k % c]
        row = ds.sel({S.GEOLEVEL: g})
        t = np.asarray(row["loss_t"].values, dtype=float)
        ok = np.isfinite(t)
        for b, p in enumerate(pairs):
            ax.plot(t[ok], np.asarray(row["loss_curve"].values[b])[ok], marker=".", label=p)
        ax.plot([float(row["t_hat"])], [float(row["eps_hat"])], "k*", markersize=10, label="t̂, ε̂")
        lb = float(row["lb"])  # raw; at or below 0 it says nothing: drawn at 0, named vacuous
        label = f"LB {VACUOUS}" if vacuous(lb) else f"LB = {lb:.3f}"
        ax.axhline(shown(lb), color="k", linestyle="--", label=label)
        ec = float(row["epsilon_c"])
        if np.isfinite(ec):
            ax.axhline(ec, color="C3", linestyle=":", label=f"ε*_C = {ec:.3f}")
        flags = [f for f in ("floor_driven", "edge", "sparse_support") if f in row and bool(row[f])]
        q = str(row["query"].values) if "query" in row else ""
        title = f"{g}" + (f" — {q.split(':')[-1]}" if q else "")
        # flags on a line of the title: inside the axes they cover the curves or the LB line
        ax.set_title(title + ("\nflags: " + ", ".join(flags) if flags else ""), fontsize="medium")
        ax.set_xlabel("released count t")
        ax.set_ylabel("ℓ̂(t)")
        ax.legend(fontsize="small", loc="best")
    for k in range(len(chosen), rows * c):
        axes[k // c][k % c].set_visible(False)
    fig.suptitle(f"MPL loss curves (α = {ds.attrs.get('alpha', '')})")
    return fig


def fdp_figure(ds: xr.Dataset, *, panel_w: float = 3.3, panel_h: float = 2.6) -> Figure:
    """Per geolevel: the certified exact β(α) (solid), the Bureau-implied one (dashed), the count's
    certified empirical points (dots) and the band from the exact curve to their convex hull."""
    _need(ds, ("fdp_alpha_upper", "fdp_beta_upper", "fdp_exact_lower", S.ALPHA), "mpl f-DP figure")
    levels = [str(g) for g in ds[S.GEOLEVEL].values]
    alpha = np.asarray(ds[S.ALPHA].values, dtype=float)
    rows, c = _grid(len(levels), 4)
    fig = Figure(figsize=(panel_w * c, panel_h * rows + 0.4), layout="constrained")
    axes = fig.subplots(rows, c, squeeze=False)
    for k, g in enumerate(levels):
        ax: Any = axes[k // c][k % c]
        row = ds.sel({S.GEOLEVEL: g})
        a_u = np.asarray(row["fdp_alpha_upper"].values, dtype=float)
        b_u = np.asarray(row["fdp_beta_upper"].values, dtype=float)
        ok = np.isfinite(a_u) & np.isfinite(b_u)
        exact = np.asarray(row["fdp_exact_lower"].values, dtype=float)
        if ok.any() and np.isfinite(exact).any():
            hull = hull_curve(a_u[ok], b_u[ok], alpha)
            ax.fill_between(
                alpha,
                exact,
                hull,
                where=hull >= exact,
                color="#7fb3d5",
                alpha=0.35,
                linewidth=0,
                label="band (count's curve)",
            )
        ax.plot(alpha, exact, color="#1f5fa8", linewidth=1.6, label="exact (certified)")
        if "fdp_bureau" in row and np.isfinite(row["fdp_bureau"].values).any():
            ax.plot(
                alpha,
                np.asarray(row["fdp_bureau"].values, dtype=float),
                color="#c0392b",
                linewidth=1.2,
                linestyle="--",
                label="Bureau",
            )
        ax.plot(a_u[ok], b_u[ok], "k.", markersize=4, label="empirical (certified)")
        ax.plot(alpha, 1 - alpha, color="0.6", linewidth=0.6, linestyle=":")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        gap = float(row["fdp_gap"]) if "fdp_gap" in row else float("nan")
        ax.set_title(f"{g}" + (f" — gap {gap:.3f}" if np.isfinite(gap) else ""), fontsize=9)
        ax.set_xlabel("type I error α", fontsize=8)
        ax.set_ylabel("type II error β", fontsize=8)
        ax.tick_params(labelsize=7)
    for k in range(len(levels), rows * c):
        axes[k // c][k % c].set_visible(False)
    axes[0][0].legend(fontsize=6, frameon=False, loc="upper right")
    return fig
