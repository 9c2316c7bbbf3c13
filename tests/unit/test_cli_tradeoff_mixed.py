"""`dpaudit tradeoff` of allocation files with other noise than the discrete Gaussian: the printed
curve against closed forms (pure ε-DP geometric, Laplace, Gaussian-DP) and, for a mixed
composition, against the Neyman–Pearson curve computed by brute force on the outputs' lattice.

The certified ``beta_lower`` must lie at or below the true curve everywhere (a valid guarantee) and
``beta_upper`` at or above it; both close to it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm
from typer.testing import CliRunner

from flows.cli.app import app

runner = CliRunner()
ALPHA = [0.0, 1e-4, 0.01, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9, 1.0]


def curve(tmp_path: Path, text: str, *extra: str) -> dict:
    path = tmp_path / "alloc.csv"
    path.write_text(text, encoding="utf-8")
    args = ["tradeoff", "-a", str(path), "-f", "json", *extra]
    for a in ALPHA:
        args += ["--alpha", str(a)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def check(out: dict, ref: np.ndarray, width: float) -> None:
    lo, hi = np.asarray(out["beta_lower"]), np.asarray(out["beta_upper"])
    assert np.all(lo <= ref + 1e-12), (lo - ref).max()  # the safe side
    assert np.all(ref <= hi + 1e-12)
    assert np.all(hi - lo <= width)
    assert "at or below the true curve" in out["note"]


def pure_dp(eps: float, a: np.ndarray) -> np.ndarray:
    return np.maximum.reduce([np.zeros_like(a), 1 - math.exp(eps) * a, math.exp(-eps) * (1 - a)])


def test_geometric_file_moved_in_two_cells(tmp_path: Path) -> None:
    """Scale b = 5/2, two cells moved: two ε₀ = 0.4 releases (randomized-response pairs)."""
    out = curve(
        tmp_path,
        "geolevel,query,mechanism,scale,sensitivity,neighbours\n"
        "State,total,geometric,5/2,2,add_remove\n",
    )
    a = np.asarray(ALPHA)
    check(out, _two_geometric(0.4, a), 1e-9)
    assert out["mechanisms"] == ["Geometric"] and out["method"] == "exact-lattice"


def _two_geometric(eps0: float, a: np.ndarray) -> np.ndarray:
    """Two ε₀-DP geometric releases: losses ±ε₀ each, so the composition's loss is 2ε₀, 0 or −2ε₀
    with the binomial masses of randomized response; its curve by Neyman–Pearson."""
    p = 1 / (1 + math.exp(-eps0))  # P[loss = +eps0] of one release under P
    losses = np.array([2 * eps0, 0.0, -2 * eps0])
    pm = np.array([p * p, 2 * p * (1 - p), (1 - p) ** 2])
    return _np_curve(losses, pm, a)


def _np_curve(losses: np.ndarray, pmass: np.ndarray, a: np.ndarray) -> np.ndarray:
    """β(α) of P vs Q from the loss atoms L = ln(p/q) and their P-masses: reject P on the smallest
    losses first (largest q/p), randomizing within an atom."""
    order = np.argsort(losses)
    ls, pm = losses[order], pmass[order]
    qm = pm * np.exp(-ls)
    cum_p = np.concatenate([[0.0], np.cumsum(pm)])
    cum_q = np.concatenate([[0.0], np.cumsum(qm)])
    return 1.0 - np.interp(a, cum_p, cum_q)


def test_single_geometric_is_f_eps_0(tmp_path: Path) -> None:
    out = curve(
        tmp_path,
        "geolevel,query,mechanism,scale,neighbours\nState,total,geometric,2,add_remove\n",
    )
    check(out, pure_dp(0.5, np.asarray(ALPHA)), 1e-9)


def test_laplace_file_is_the_laplace_curve(tmp_path: Path) -> None:
    """Laplace of scale 2 (ε = 1/2): Dong–Roth–Su's closed form, above f_{ε,0} near its kink."""
    out = curve(
        tmp_path,
        "geolevel,query,mechanism,scale,neighbours\nState,total,laplace,2,add_remove\n",
    )
    a = np.asarray(ALPHA)
    e = math.exp(-0.5)
    with np.errstate(divide="ignore"):
        ref = np.where(a < e / 2, 1 - a / e, np.where(a <= 0.5, e / (4 * a), e * (1 - a)))
    check(out, ref, 2e-5)
    assert out["method"] == "bracket-grid"
    lo, f = np.asarray(out["beta_lower"]), pure_dp(0.5, a)
    assert np.all(lo >= f - 1e-5) and lo[ALPHA.index(0.35)] > f[ALPHA.index(0.35)] + 1e-3


def test_gaussian_file_is_gaussian_dp(tmp_path: Path) -> None:
    """σ = 2, three cells moved: μ = √3/2 and G_μ(α) = Φ(Φ⁻¹(1−α) − μ)."""
    out = curve(
        tmp_path,
        "geolevel,query,mechanism,sigma,sensitivity,neighbours\n"
        "State,total,gaussian,2,3,add_remove\n",
    )
    mu = math.sqrt(3) / 2
    a = np.asarray(ALPHA)
    check(out, norm.cdf(norm.ppf(1 - a) - mu), 2e-5)
    assert out["gdp_mu_estimate"] == pytest.approx(mu, rel=1e-3)


def _dg_log_pmf(sigma2: float, mean: int, support: np.ndarray) -> np.ndarray:
    log_z = np.log(np.exp(-(support**2) / (2 * sigma2)).sum())
    return -((support - mean) ** 2) / (2 * sigma2) - log_z


def _geo_log_pmf(b: float, mean: int, support: np.ndarray) -> np.ndarray:
    return -np.abs(support - mean) / b - np.log(np.exp(-np.abs(support) / b).sum())


def test_mixed_composition_against_brute_force(tmp_path: Path) -> None:
    """A discrete Gaussian (σ² = 3) and a geometric moved in two cells (b = 2), composed: the
    printed curve against Neyman–Pearson on every output (x, y₁, y₂) of a ±80 lattice (D: noise
    around 0; D′: every released value moved by one)."""
    out = curve(
        tmp_path,
        "geolevel,query,mechanism,sigma2,scale,sensitivity,neighbours\n"
        "State,total,discrete_gaussian,3,,,add_remove\n"
        "County,pair,geometric,,2,2,add_remove\n",
    )
    k = np.arange(-80, 81)
    p1, q1 = _dg_log_pmf(3.0, 0, k), _dg_log_pmf(3.0, 1, k)
    p2, q2 = _geo_log_pmf(2.0, 0, k), _geo_log_pmf(2.0, 1, k)
    log_p = (p1[:, None, None] + p2[None, :, None] + p2[None, None, :]).ravel()
    log_q = (q1[:, None, None] + q2[None, :, None] + q2[None, None, :]).ravel()
    ref = _np_curve(log_p - log_q, np.exp(log_p), np.asarray(ALPHA))
    check(out, ref, 1e-9)
    assert out["mechanisms"] == ["DiscreteGaussian", "Geometric"]
    assert out["geolevel"] == "all levels composed"


def test_mixed_csv_says_the_curve_errs_low(tmp_path: Path) -> None:
    path = tmp_path / "alloc.csv"
    path.write_text(
        "geolevel,query,mechanism,sigma2,scale,neighbours\n"
        "State,a,discrete_gaussian,4,,bounded\nState,b,laplace,,3,bounded\n",
        encoding="utf-8",
    )
    res = runner.invoke(app, ["tradeoff", "-a", str(path), "--points", "5", "-n", "bounded"])
    assert res.exit_code == 0, res.output
    head, header, *rows = res.stdout.strip().splitlines()
    assert "at or below the true curve" in head and "method=bracket-grid" in head
    assert header == "alpha,beta_lower,beta_upper,beta_bureau" and len(rows) == 5
