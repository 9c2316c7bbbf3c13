"""Tests of the HTML audit report rendered from a result store."""

from __future__ import annotations

import base64
import io
import json
import math
import os
import pathlib
import re

import numpy as np
import pytest
import xarray as xr
from matplotlib import image as mpimg

from flows.report import render as report
from flows.report.figures_residuals import dg_pmf
from flows.report.format import fmt_bracket, fmt_delta
from flows.report.render import render_report

LEVELS = ["US", "State", "County"]
# the nation is a state-equivalent with data at the national level only, as the audit writes it
STATES = ["US", "ST01", "ST02"]
NATION = 0
QUERIES = ["total", "age_38_groups * sex"]
DELTAS = [1e-5, 1e-10]
# σ² per (level, query); NaN: the query is not measured at the level.
SIGMA2 = np.array([[2.5, 40.0], [6.0, 120.0], [15.0, np.nan]])
SPEC_TOML = """\
[audit]
name = "pl94 production <script>alert(1)</script>"
allocation = "pl94_2021_production"
neighbours = "add_remove"

[epl]
bandwidth_factor = 0.1
percentiles = [5, 95]
"""
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
IMG_RE = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _gauss_delta(eps: float, rho: float) -> float:
    """δ(ε) of a Gaussian mechanism with zCDP ρ (μ = √(2ρ))."""
    mu = math.sqrt(2.0 * rho)
    return _phi(-eps / mu + mu / 2.0) - math.exp(eps) * _phi(-eps / mu - mu / 2.0)


def _gauss_eps(delta: float, rho: float) -> float:
    lo, hi = 0.0, 100.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _gauss_delta(mid, rho) > delta else (lo, mid)
    return hi


def _bureau_eps(delta: float, rho: float) -> float:
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def _cks_eps(delta: float, rho: float) -> float:
    alphas = np.linspace(1.01, 400.0, 40_000)
    eps = alphas * rho + (
        np.log(1.0 / delta) + (alphas - 1) * np.log1p(-1.0 / alphas) - np.log(alphas)
    ) / (alphas - 1)
    return float(eps.min())


def _root_attrs(spec: str = SPEC_TOML) -> dict[str, object]:
    return {
        "dpaudit_version": "0.1.0",
        "run_id": "run-20250101-abc123",
        "spec_toml": spec,
        "allocation_id": "pl94_2021_production",
        "allocation_source": "Census Bureau PL 94-171 production settings (2021)",
        "neighbours": "add_remove",
        "created_utc": "2025-01-01T12:00:00+00:00",
        "seed": 20250101,
        "n_workers": 2,
        "dask_scheduler": "tcp://127.0.0.1:8786",
        "software": json.dumps({"numpy": "2.1.0", "xarray": "2025.1.0", "zarr": "3.0.1"}),
        "wall_time_s": 3723.4,
    }


def _accounting() -> xr.Dataset:
    rho = np.nansum(1.0 / (2.0 * SIGMA2), axis=1)
    n_q = np.sum(np.isfinite(SIGMA2), axis=1).astype(np.int64)
    eps_grid = np.linspace(0.0, 12.0, 200)
    shape = (len(LEVELS), len(DELTAS))
    exact, bureau, cks = np.empty(shape), np.empty(shape), np.empty(shape)
    for i, r in enumerate(rho):
        for j, d in enumerate(DELTAS):
            exact[i, j] = _gauss_eps(d, r)
            bureau[i, j] = _bureau_eps(d, r)
            cks[i, j] = _cks_eps(d, r)
    d_exact = np.array([[min(_gauss_delta(e, r) * 1.000001, 1.0) for e in eps_grid] for r in rho])
    d_bureau = np.array(
        [[math.exp(-((e - r) ** 2) / (4 * r)) if e > r else 1.0 for e in eps_grid] for r in rho]
    )
    c_rho = float(rho.sum())
    c_exact = np.array([_gauss_eps(d, c_rho) for d in DELTAS])
    # Su, Su & Wang's reduced noise: a made-up certified factor per level (rendered, not recomputed)
    factor_lo = np.array([0.79, 0.8492, 0.7518])
    factor_hi = factor_lo + 2e-9
    return xr.Dataset(
        {
            "calibration_factor_lower": ("geolevel", factor_lo),
            "calibration_factor_upper": ("geolevel", factor_hi),
            "variance_cut_lower": ("geolevel", 1 - factor_hi),
            "variance_cut_upper": ("geolevel", 1 - factor_lo),
            "reduced_sigma2_min": ("geolevel", factor_hi * np.nanmin(SIGMA2, axis=1)),
            "reduced_sigma2_max": ("geolevel", factor_hi * np.nanmax(SIGMA2, axis=1)),
            "composed_variance_cut_lower": ((), 0.1228),
            "composed_variance_cut_upper": ((), 0.12280001),
            "rho": ("geolevel", rho),
            "sigma2_min": ("geolevel", np.nanmin(SIGMA2, axis=1)),
            "sigma2_max": ("geolevel", np.nanmax(SIGMA2, axis=1)),
            "n_queries": ("geolevel", n_q),
            "eps_exact_lower": (("geolevel", "delta"), exact - 3.1e-7),
            "eps_exact_upper": (("geolevel", "delta"), exact + 2.2e-7),
            "eps_bureau": (("geolevel", "delta"), bureau),
            "eps_cks": (("geolevel", "delta"), cks),
            "delta_exact_upper": (("geolevel", "eps_grid"), d_exact),
            "delta_bureau": (("geolevel", "eps_grid"), d_bureau),
            "composed_eps_exact_lower": ("delta", c_exact - 4e-7),
            "composed_eps_exact_upper": ("delta", c_exact + 4e-7),
            "composed_eps_bureau": ("delta", [_bureau_eps(d, c_rho) for d in DELTAS]),
            "composed_eps_cks": ("delta", [_cks_eps(d, c_rho) for d in DELTAS]),
            "composed_rho": ((), c_rho),
        },
        coords={
            "geolevel": np.array(LEVELS, dtype=object),
            "delta": np.array(DELTAS),
            "eps_grid": eps_grid,
        },
        attrs={
            "method": "exact-lattice",
            "neighbours": "add_remove",
            "headline_delta": 1e-10,
            "calibration_delta": 1e-5,  # Su, Su & Wang's δ*: not the headline δ
        },
    )


def _accuracy() -> xr.Dataset:
    """MSE = σ², MAE = σ√(2/π) (large σ²), halved at count 0 and fading linearly: display only."""
    factor = np.array([0.79, 0.8492, 0.7518])
    s2 = np.stack([SIGMA2, SIGMA2 * factor[:, None]], axis=-1)
    counts = np.arange(11)
    fade = np.minimum(1.0, 0.5 + counts / 20.0)
    mae = np.sqrt(2 * s2 / math.pi)
    return xr.Dataset(
        {
            "sigma2": (("geolevel", "query", "noise"), s2),
            "mse": (("geolevel", "query", "noise"), s2),
            "mae": (("geolevel", "query", "noise"), mae),
            "mse_clipped": (("geolevel", "query", "noise", "count"), s2[..., None] * fade),
            "mae_clipped": (("geolevel", "query", "noise", "count"), mae[..., None] * fade),
        },
        coords={
            "geolevel": np.array(LEVELS, dtype=object),
            "query": np.array(QUERIES, dtype=object),
            "noise": np.array(["bureau", "reduced"], dtype=object),
            "count": counts,
        },
    )


MPL_LB = [0.123456, 0.654321]


def _mpl() -> xr.Dataset:
    """The mpl group's layout (storage/schema.py) for two levels, with made-up loss curves."""
    t = np.tile(np.linspace(-5, 5, 30), (2, 1))
    curves = np.stack([np.stack([0.1 * np.abs(t[i]), 0.12 * np.abs(t[i])]) for i in range(2)])
    return xr.Dataset(
        {
            "query": ("geolevel", np.array(["total", "total"], dtype=object)),
            "sigma2": ("geolevel", [2.5, 6.0]),
            "count": ("geolevel", [12, 3]),
            "lb": ("geolevel", MPL_LB),
            "eps_hat": ("geolevel", [0.3, 0.8]),
            "t_hat": ("geolevel", [4.0, -2.0]),
            "epsilon_c": ("geolevel", [0.4, 0.9]),
            "floor_driven": ("geolevel", [False, False]),
            "edge": ("geolevel", [True, False]),
            "sparse_support": ("geolevel", [True, False]),
            "loss_curve": (("geolevel", "mpl_pair", "point"), curves),
            "loss_t": (("geolevel", "point"), t),
        },
        coords={
            "geolevel": np.array(LEVELS[:2], dtype=object),
            "mpl_pair": np.array(["add", "remove"], dtype=object),
        },
        attrs={"alpha": 0.05},
    )


# composed EPL: value, interval, projection, dependence factor; cross-level correlations
COMPOSED = (1.234567, 0.98765, 1.45678, 0.876543, 0.93456)
LEVEL_CORR = np.array([[1.0, 0.0571, -0.0123], [0.0571, 1.0, 0.0432], [-0.0123, 0.0432, 1.0]])
N_SURFACE = 101


def _dg_loss(x: np.ndarray, sigma2: float) -> np.ndarray:
    """log p(x)/p(x + 1) of a discrete Gaussian: (2x + 1)/(2σ²)."""
    return (2.0 * x + 1.0) / (2.0 * sigma2)


def _surfaces(rng: np.random.Generator, n_l: int, n_q: int) -> dict[str, object]:
    """EPL(x) surfaces per state and pooled: the DG loss plus noise, a band around it, NaN pads."""
    n_s = len(STATES)
    out: dict[str, np.ndarray] = {}
    # (state, level) pairs with data: the nation at the national level, the states below it
    holds = [[(k == NATION) == (i == 0) for i in range(n_l)] for k in range(n_s)]
    for prefix, lead in (("surface_pooled", ()), ("surface", (n_s,))):
        x = np.full((*lead, n_l, n_q, N_SURFACE), np.nan, dtype=np.float32)
        y, lo, hi = x.copy(), x.copy(), x.copy()
        for i in range(n_l):
            for q in range(n_q):
                if not np.isfinite(SIGMA2[i, q]):
                    continue
                reach = int(1.645 * math.sqrt(SIGMA2[i, q]))
                xs = np.arange(-reach, reach, dtype=np.float64)[:N_SURFACE]
                m = xs.size
                for idx in np.ndindex(*lead):
                    if idx and not holds[idx[0]][i]:
                        continue
                    ys = _dg_loss(xs, SIGMA2[i, q]) + rng.normal(0, 0.02, m)
                    x[(*idx, i, q, slice(0, m))] = xs
                    y[(*idx, i, q, slice(0, m))] = ys
                    lo[(*idx, i, q, slice(0, m))] = ys - 0.05
                    hi[(*idx, i, q, slice(0, m))] = ys + 0.05
        dims = (*(("state",) if lead else ()), "geolevel", "query", "surface_point")
        for suffix, a in (("_x", x), ("", y), ("_low", lo), ("_high", hi)):
            out[prefix + suffix] = (dims, a)
    return out  # type: ignore[return-value]


# the matched-reference floors: (US, total) below its estimate, (US, age × sex) within 10 % of the
# claimed noise's loss (resolved), the State pairs above it (not resolved at 2 replicates)
FLOOR = np.array([[0.8, 0.225], [0.9, 0.2], [np.nan, np.nan]])
BIAS_AWARE_KNOBS = {"bandwidth": 0.3, "bandwidth_kind": "factor", "null_quantile": 0.95, "shift": 1}


def _epl(rng: np.random.Generator) -> xr.Dataset:
    n_l, n_q, n_p = len(LEVELS), len(QUERIES), 40
    measured = np.isfinite(SIGMA2)
    status = np.where(measured, "ok", "").astype(object)
    status[2, 0] = "too_few"
    n_res = np.where(measured, 2000, 0).astype(np.int64)
    n_res[2, 0] = 12
    pooled = np.where(measured, 1.645 / np.sqrt(SIGMA2), np.nan)
    pooled[0, 0] = 0.987654
    per_state = pooled[None, :, :] * (1.0 + rng.uniform(-0.1, 0.1, size=(len(STATES), n_l, n_q)))
    per_state[NATION, 1:] = np.nan  # the nation: the national level only
    per_state[NATION + 1 :, 0] = np.nan
    per_state[1, 1, 0] = 0.9
    per_state[2, 1, 0] = 1.1
    curve_x = np.full((n_l, n_q, n_p), np.nan)
    curve = np.full((n_l, n_q, n_p), np.nan)
    for i in range(n_l):
        for q in range(n_q):
            if measured[i, q]:
                s = math.sqrt(SIGMA2[i, q])
                m = n_p - 5 * q  # NaN padding on the second query
                curve_x[i, q, :m] = np.linspace(-1.645 * s, 1.645 * s, m)
                curve[i, q, :m] = np.abs(curve_x[i, q, :m]) / SIGMA2[i, q] + rng.normal(0, 0.01, m)
    surf = _surfaces(rng, n_l, n_q)
    return xr.Dataset(
        {
            **surf,
            "epl_bias_aware": (("geolevel", "query"), pooled * 1.01),
            "epl_ci_low": (("geolevel", "query"), pooled * 0.9),
            "epl_ci_high": (("geolevel", "query"), pooled * 1.1),
            "epl_null_upper": (("geolevel", "query"), FLOOR),
            "epl_composed": ((), COMPOSED[0], {"composed_over": "paths <leaf> -> root"}),
            "epl_composed_ci_low": ((), COMPOSED[1]),
            "epl_composed_ci_high": ((), COMPOSED[2]),
            "epl_composed_projection": ((), COMPOSED[3]),
            "composed_dependence_factor": ((), COMPOSED[4]),
            "level_correlation": (("geolevel", "geolevel_b"), LEVEL_CORR),
            "epl": (("state", "geolevel", "query"), per_state),
            "epl_pooled": (("geolevel", "query"), pooled),
            "epl_status": (("geolevel", "query"), status),
            "n_residuals": (("geolevel", "query"), n_res),
            "sigma2": (("geolevel", "query"), SIGMA2),
            "bandwidth": (("geolevel", "query"), np.where(measured, 0.1 * np.sqrt(SIGMA2), np.nan)),
            "epl_curve_x": (("geolevel", "query", "point"), curve_x),
            "epl_curve": (("geolevel", "query", "point"), curve),
        },
        coords={
            "state": np.array(STATES, dtype=object),
            "geolevel": np.array(LEVELS, dtype=object),
            "query": np.array(QUERIES, dtype=object),
            "point": np.arange(n_p),
            "geolevel_b": np.array(LEVELS, dtype=object),
        },
        attrs={
            "method": "flaxman_petti",
            "bandwidth_factor": 0.1,
            "percentiles": "5,95",
            "bias_aware_settings": json.dumps(BIAS_AWARE_KNOBS),
        },
    )


def _residuals(rng: np.random.Generator) -> xr.Dataset:
    n_s, n_l, n_r, n_items = len(STATES), len(LEVELS), 2, 300
    n_items_arr = np.array([[2, 0, 0], [0, 60, 300], [0, 40, 250]], dtype=np.int64)
    residual = np.full((n_s, n_l, n_r, n_items), np.nan, dtype=np.float32)
    qidx = np.full((n_s, n_l, n_items), -1, dtype=np.int16)
    truth = np.zeros((n_s, n_l, n_items), dtype=np.int32)
    for s in range(n_s):
        for i in range(n_l):
            n = int(n_items_arr[s, i])
            q = rng.integers(0, len(QUERIES), size=n)
            q[~np.isfinite(SIGMA2[i, q])] = 0
            qidx[s, i, :n] = q
            truth[s, i, :n] = rng.integers(0, 5000, size=n)
            sd = np.sqrt(SIGMA2[i, q])
            residual[s, i, :, :n] = np.round(rng.normal(0.0, sd, size=(n_r, n)))
    return xr.Dataset(
        {
            "residual": (("state", "geolevel", "replicate", "item"), residual),
            "query_index": (("state", "geolevel", "item"), qidx),
            "truth": (("state", "geolevel", "item"), truth),
            "n_items": (("state", "geolevel"), n_items_arr),
            "sigma2": (("geolevel", "query"), SIGMA2),
        },
        coords={
            "state": np.array(STATES, dtype=object),
            "geolevel": np.array(LEVELS, dtype=object),
            "replicate": np.arange(n_r),
            "query": np.array(QUERIES, dtype=object),
        },
    )


def build_store(
    path: pathlib.Path,
    groups: tuple[str, ...],
    spec: str = SPEC_TOML,
    drop: tuple[str, ...] = (),
) -> pathlib.Path:
    """Write a result store with the given groups; ``drop`` removes variables from every group."""
    rng = np.random.default_rng(7)
    xr.Dataset(attrs=_root_attrs(spec)).to_zarr(path, mode="w", zarr_format=3, consolidated=True)
    makers = {
        "accounting": _accounting,
        "epl": lambda: _epl(rng),
        "residuals": lambda: _residuals(rng),
        "accuracy": _accuracy,
        "mpl": _mpl,
    }
    for name in groups:
        ds = makers[name]().drop_vars(list(drop), errors="ignore")
        ds.to_zarr(path, group=name, mode="w", zarr_format=3, consolidated=True)
    return path


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, str]:
    tmp = tmp_path_factory.mktemp("report")
    store = build_store(tmp / "result.zarr", ("accounting", "epl", "residuals", "accuracy", "mpl"))
    out = render_report(store, tmp / "out" / "report.html")
    return out, out.read_text(encoding="utf-8")


def _images(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in IMG_RE.findall(html)]


def test_full_report_is_complete_html(full: tuple[pathlib.Path, str]) -> None:
    out, html = full
    assert out.is_file() and out.name == "report.html"
    assert html.lstrip().startswith("<!DOCTYPE html>")
    assert html.rstrip().endswith("</html>")
    for tag in ("<head>", "</head>", "<body>", "</body>", "<title>", "<h1>dpaudit report</h1>"):
        assert tag in html
    # header
    for text in (
        "pl94_2021_production",
        "Census Bureau PL 94-171 production settings (2021)",
        "add/remove one person",
        "run-20250101-abc123",
        "2025-01-01T12:00:00+00:00",
        "20250101",
        "1 h 02 min 03 s",
    ):
        assert text in html
    # no external resources
    assert not re.search(r"""(?:src|href)=["']?(?:https?:)?//""", html)
    assert "@import" not in html and "<link" not in html and "<script" not in html


def test_figures_are_embedded_valid_pngs(full: tuple[pathlib.Path, str]) -> None:
    _, html = full
    images = _images(html)
    # (ε, δ), EPL, residuals, accuracy MSE and MAE, MPL loss curves, one EPL(x) surface per level
    assert len(images) == 6 + len(LEVELS)
    assert html.count('<img src="data:image/png;base64,') == 6 + len(LEVELS)
    for png in images:
        assert png.startswith(PNG_SIGNATURE)
        arr = mpimg.imread(io.BytesIO(png), format="png")
        assert arr.ndim == 3 and arr.shape[0] > 100 and arr.shape[1] > 100
    # every figure has alt text and a caption
    assert len(re.findall(r'<img src="data:[^"]+" alt="[^"]{20,}">', html)) == 6 + len(LEVELS)
    assert html.count("<figcaption>") == 6 + len(LEVELS)


def _between(html: str, start: str, end: str) -> str:
    return html[html.index(start) : html.index(end, html.index(start))]


SURFACE_FIG_RE = re.compile(
    r'<figure class="fig-epl-surface" id="fig-epl-surface-(\d+)">\s*'
    r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)">\s*'
    r"<figcaption>(.*?)</figcaption>",
    re.S,
)


def test_epl_surfaces_one_figure_per_level(full: tuple[pathlib.Path, str]) -> None:
    _, html = full
    figs = SURFACE_FIG_RE.findall(html)
    assert [f[0] for f in figs] == ["1", "2", "3"]
    for (_, _, alt, caption), level in zip(figs, LEVELS, strict=True):
        assert f"Level {level}:" in alt and f"at level {level}" in caption
        assert "90 % basic bootstrap band" in caption and "(2x + 1)/(2σ²)" in caption
    # a column per state with data at the level; at US only the nation, whose surface is pooled
    assert "first column pooled (the only region with data here: US)." in figs[0][3]
    assert "then one column each for ST01, ST02." in figs[1][3]
    widths = [mpimg.imread(io.BytesIO(base64.b64decode(f[1])), format="png").shape[1] for f in figs]
    assert widths[0] < 0.5 * widths[1] and widths[1] == widths[2]
    # rows are queries: US and State show both queries, County only the measured one
    assert "all 2 queries" in figs[0][3] and "all 1 query" in figs[2][3]
    heights = [
        mpimg.imread(io.BytesIO(base64.b64decode(f[1])), format="png").shape[0] for f in figs
    ]
    assert heights[0] == heights[1] and heights[2] < 0.75 * heights[0]
    assert "the table above lists every query" in html


def test_epl_surfaces_are_capped_and_say_so(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.report import figures_epl as report_epl

    monkeypatch.setattr(report_epl, "SURFACE_MAX_QUERIES", 1)
    monkeypatch.setattr(report_epl, "SURFACE_MAX_STATES", 1)
    store = build_store(tmp_path / "s.zarr", ("epl",))
    html = render_report(store, tmp_path / "r.html").read_text(encoding="utf-8")
    figs = SURFACE_FIG_RE.findall(html)
    assert len(figs) == len(LEVELS)
    assert "the 1 of 2 queries with the largest bias-aware EPL" in figs[0][3]
    assert "then one column each for ST01 (1 of the 2 with data at this level)" in figs[1][3]
    assert "up to 1 queries per level are not shown" in html
    # one query row, two columns (pooled + one state): wider than high
    img = mpimg.imread(io.BytesIO(base64.b64decode(figs[1][1])), format="png")
    assert img.shape[1] > 1.5 * img.shape[0]


def test_composed_epl_table(full: tuple[pathlib.Path, str]) -> None:
    _, html = full
    table = _between(html, '<table class="epl-composed">', "</table>")
    # per level: the sum of the bias-aware EPLs (pooled × 1.01) over its queries with status ok
    us = 1.01 * (0.987654 + 1.645 / math.sqrt(40.0))
    state = 1.01 * (1.645 / math.sqrt(6.0) + 1.645 / math.sqrt(120.0))
    assert f"{us:.4g}" in table and f"{state:.4g}" in table
    county = re.search(r"County</td><td class=\"num\">0</td>\s*<td class=\"num\">—", table)
    assert county is not None  # the County query has too few residuals: no EPL
    assert "<strong>1.235</strong>" in table and "[0.9877, 1.457]" in table
    # beside it: the sum of the floors (0.8 + 0.225 + 0.9 + 0.2)
    assert "2.125" in table
    assert (
        "Projection (lower-bound check): 0.8765" in html and "dependence factor:\n    0.935" in html
    )
    corr = _between(html, '<table class="epl-correlation">', "</table>")
    assert corr.count("+1.000") == 3 and "+0.057" in corr and "−0.012" in corr
    assert "which way" not in corr
    assert "sum of the levels' bias-aware EPLs" in html and "upward" in html
    assert "paths &lt;leaf&gt; -&gt; root" in html and "<leaf>" not in html
    summary = _between(html, '<ul class="summary" id="summary">', "</ul>")
    assert "the EPL is 1.235 (interval [0.9877, 1.457]). It is no ε(δ)" in summary
    assert "sum of the floors" in summary


def test_epl_without_surfaces_or_composed(tmp_path: pathlib.Path) -> None:
    drop = (
        "surface_pooled",
        "surface",
        "epl_composed",
    )
    store = build_store(tmp_path / "s.zarr", ("epl",), drop=drop)
    html = render_report(store, tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'id="epl-surfaces"' not in html and 'id="epl-composed"' not in html
    assert 'id="fig-epl"' in html


def test_summary_table_puts_the_three_answers_side_by_side(
    full: tuple[pathlib.Path, str],
) -> None:
    _, html = full
    acc = _accounting()
    table = _between(html, '<table class="glance">', "</table>")
    assert "pl94_2021_production" in table and "headline δ = 1e-10" in table
    assert table.count('class="level"') == len(LEVELS) + 1  # and all levels composed
    j = DELTAS.index(1e-10)  # the headline δ (the calibration δ* is 1e-5)
    for i, level in enumerate(LEVELS):
        assert f"{float(acc['eps_bureau'][i, j]):.5g}" in table
        lo, hi = float(acc["eps_exact_lower"][i, j]), float(acc["eps_exact_upper"][i, j])
        assert f">{fmt_bracket(lo, hi)}<" in table
        assert f"{float(acc['eps_bureau'][i, 1 - j]):.5g}" not in table  # no other δ
        assert level in table
    # the level's largest bias-aware EPL with its interval and floor: (US, total) 0.988 × 1.01
    assert "0.998 [0.889, 1.09]" in table and ">0.8<" in table
    assert "above its floor" in table
    # the reduced noise is at δ* (another δ): in the accounting section, not here
    assert "15.08 %" not in table and "15.08 %" in _between(
        html, '<table class="reduced">', "</table>"
    )
    # MPL lower bounds where the mpl group has the level, "not run" elsewhere
    assert "0.1235" in table and "0.6543" in table and table.count("not run") == 1


def test_accuracy_section_values(full: tuple[pathlib.Path, str]) -> None:
    _, html = full
    table = _between(html, '<table class="accuracy">', "</table>")
    assert table.count('class="level"') == len(LEVELS)
    # State: the median-σ² query of (6, 120) is 6; MSE 6 → 5.095 (−15.08 %)
    assert "−" not in table.replace("—", "")  # plain hyphen-minus in changes
    assert "-15.08 %" in table and "-24.82 %" in table
    assert 'id="fig-accuracy-mse"' in html and 'id="fig-accuracy-mae"' in html


def test_mpl_section_and_its_absence(
    full: tuple[pathlib.Path, str], tmp_path: pathlib.Path
) -> None:
    _, html = full
    table = _between(html, '<table class="mpl">', "</table>")
    assert "0.1235" in table and "0.9" in table and "α = 0.05" in html
    store = build_store(tmp_path / "s.zarr", ("accounting",))
    text = render_report(store, tmp_path / "r.html").read_text(encoding="utf-8")
    assert "MPL not run" in text
    glance = _between(text, '<table class="glance">', "</table>")
    assert glance.count("not run") == len(LEVELS) * 2  # MPL and EPL columns


def test_mpl_loss_curves_and_flags_in_words(full: tuple[pathlib.Path, str]) -> None:
    _, html = full
    section = _between(html, '<section id="mpl">', "</section>")
    assert 'id="fig-mpl"' in section and "t̂" in section and "ε*_C" in section
    table = _between(section, '<table class="mpl">', "</table>")
    assert '<td class="num">4</td>' in table and '<td class="num">-2</td>' in table  # t̂
    flags = _between(section, '<ul class="mpl-flags">', "</ul>")
    assert "<strong>US</strong>: edge: t̂ lies on the edge" in flags
    assert "sparse support: fewer than 20" in flags and "floor-driven" not in flags
    assert "<strong>State</strong>" not in flags  # no flag raised there
    assert 'id="mpl-coverage"' not in html


def test_mpl_section_from_a_real_mpl_group(
    tmp_path: pathlib.Path, real_mpl_group: xr.Dataset
) -> None:
    ds = real_mpl_group
    store = build_store(tmp_path / "s.zarr", ())
    ds.to_zarr(store, group="mpl", mode="w", zarr_format=3, consolidated=True)
    html = render_report(store, tmp_path / "r.html").read_text(encoding="utf-8")
    section = _between(html, '<section id="mpl">', "</section>")
    png = re.search(r'<figure id="fig-mpl">\s*<img src="data:image/png;base64,([^"]+)"', section)
    assert png is not None and base64.b64decode(png.group(1)).startswith(PNG_SIGNATURE)
    table = _between(section, '<table class="mpl">', "</table>")
    for lb, t_hat in zip(ds["lb"].values, ds["t_hat"].values, strict=True):
        assert f"{float(lb):.4g}" in table and f"{float(t_hat):.4g}" in table
    # the flags in words follow the stored flags, level by level
    for i, level in enumerate(ds["geolevel"].values):
        raised = [f for f in ("floor_driven", "edge", "sparse_support") if bool(ds[f].values[i])]
        item = re.search(rf"<li><strong>{level}</strong>: (.*?)</li>", section, re.S)
        assert (item is not None) == bool(raised)
        if item is not None:
            assert ("edge:" in item.group(1)) == ("edge" in raised)
            assert ("floor-driven" in item.group(1)) == ("floor_driven" in raised)


def _coverage_store(path: pathlib.Path, ds: xr.Dataset) -> tuple[pathlib.Path, xr.Dataset]:
    """A store as ``dpaudit mpl-coverage`` writes it, its group ``ds``."""
    from flows.experiments.mpl_coverage import GROUP

    xr.Dataset(attrs={"run_id": "cov-1", "seed": 3}).to_zarr(
        path, mode="w", zarr_format=3, consolidated=True
    )
    ds.to_zarr(path, group=GROUP, mode="w", zarr_format=3, consolidated=True)
    return path, ds


def test_coverage_store_renders_the_lb_ecdfs(
    tmp_path: pathlib.Path, real_coverage_group: xr.Dataset
) -> None:
    store, ds = _coverage_store(tmp_path / "cov.zarr", real_coverage_group)
    html = render_report(store, tmp_path / "r.html").read_text(encoding="utf-8")
    assert "written by dpaudit mpl-coverage" in html
    # an mpl-coverage store is not an audit missing its groups: no audit sections, no absences
    assert 'id="missing"' not in html and 'id="at-a-glance"' not in html
    assert 'id="accounting"' not in html
    section = _between(html, '<section id="mpl-coverage">', "</section>")
    assert "1. Coverage of the MPL lower bound" in section and "6 repetitions" in section
    assert "2. Provenance" in html and "6. Provenance" not in html  # numbered in reading order
    rows = re.findall(r'<tr><td class="level">([^<]+)</td><td class="num">([^<]+)</td>', section)
    assert rows == [
        ("laplace", "0.7"),
        ("laplace", "1.5"),
        ("gdpc_count", "0.7"),
        ("gdpc_count", "1.5"),
    ]
    for k in range(2):
        for j in range(2):
            assert f"{float(ds['coverage'].values[k, j]):.3g}" in section
    png = re.search(
        r'<figure id="fig-mpl-coverage">\s*<img src="data:image/png;base64,([^"]+)"', section
    )
    assert png is not None
    img = mpimg.imread(io.BytesIO(base64.b64decode(png.group(1))), format="png")
    assert img.shape[1] > img.shape[0]  # two mechanism panels side by side
    assert "Fig. 4" in section


def test_summary_paragraph(full: tuple[pathlib.Path, str]) -> None:
    _, html = full
    text = _between(html, '<ul class="summary" id="summary">', "</ul>")
    assert "At δ = 1e-10" in text and "1e-5" not in text
    assert "Bureau" in text and "largest exact ε is that of level" in text
    # the summary quotes the glance table's EPL: the bias-aware one, not the Flaxman–Petti
    assert "(EPL, bias-aware) is largest at level US (“total”): 0.998 [0.889, 1.09]" in text
    assert "0.9877" not in text.replace("[0.9877, 1.457]", "")
    assert "Absent from this store" not in html
    assert 'id="headline-delta"' in html and html.count("headline δ = <strong>1e-10") == 1


def test_accounting_table_values(full: tuple[pathlib.Path, str]) -> None:
    _, html = full
    acc = _accounting()
    table = _between(html, '<table class="accounting">', "</table>")
    assert "all levels composed" in table
    assert table.count('class="level"') == len(LEVELS) + 1
    assert "0.2125" in table  # ρ(US) = 1/(2·2.5) + 1/(2·40)
    assert "2.5 – 40" in table and "15" in table  # σ² ranges; County has one query
    assert "1e-5" in table and "1e-10" in table
    for i in range(len(LEVELS)):
        for j in range(len(DELTAS)):
            lo = float(acc["eps_exact_lower"][i, j])
            hi = float(acc["eps_exact_upper"][i, j])
            assert fmt_bracket(lo, hi) in table
            bureau = float(acc["eps_bureau"][i, j])
            assert f"{bureau:.5g}" in table
            assert f"{100 * (bureau - hi) / bureau:.1f} %" in table
    lo = float(acc["composed_eps_exact_lower"][1])
    hi = float(acc["composed_eps_exact_upper"][1])
    assert fmt_bracket(lo, hi) in table
    assert f"{float(acc['composed_rho']):.5g}" in table


def test_epl_table_values(full: tuple[pathlib.Path, str]) -> None:
    _, html = full
    table = _between(html, '<table class="epl">', "</table>")
    assert "0.998 [0.889, 1.09]" in table  # bias-aware EPL of (US, total) with its interval
    assert "too few residuals" in table
    assert "age_38_groups * sex" in table
    assert "2\u202f000" in table and ">12<" in table  # residual counts
    # 5 measured pairs, the (County, age × sex) pair is not measured
    assert table.count("<tr") == 1 + 5
    assert "One level–query pair that is not measured is omitted." in html
    assert "unbounded" in html and "slope 1/σ²" in html
    assert "5th and 95th percentile" in html
    # the Flaxman–Petti estimate and the diagnostics: in their own table
    diag = _between(html, '<table class="epl-diagnostics">', "</table>")
    assert "0.9877" in diag and "0.9 – 1.1" in diag and diag.count('class="status ok"') == 4
    # two states and the nation, never the nation counted as a state
    states = _between(html, '<p class="note" id="epl-states">', "</p>")
    assert (
        "2\n    states (ST01, ST02)" in states and "the nation (US, at the national level" in states
    )


def test_spec_is_escaped(full: tuple[pathlib.Path, str]) -> None:
    _, html = full
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)</script>" not in html
    spec = re.search(r'<pre class="spec" id="spec">(.*?)</pre>', html, re.S)
    assert spec is not None and "allocation = &#34;pl94_2021_production&#34;" in spec.group(1)
    # the spec's name heads the report, as text
    name = re.search(r'<dd id="audit-name">(.*?)</dd>', html)
    assert name is not None
    assert name.group(1) == "pl94 production &lt;script&gt;alert(1)&lt;/script&gt;"
    # software table
    assert "<td>xarray</td><td>2025.1.0</td>" in html


def test_missing_groups_render_with_note(tmp_path: pathlib.Path) -> None:
    store = build_store(tmp_path / "acc_only.zarr", ("accounting",))
    out = render_report(str(store), tmp_path / "acc_only.html")
    html = out.read_text(encoding="utf-8")
    assert html.rstrip().endswith("</html>")
    assert len(_images(html)) == 1  # the (ε, δ) figure only
    missing = re.search(r'<p class="absent" id="missing">(.*?)</p>', html, re.S)
    assert missing is not None
    assert "<code>epl</code>" in missing.group(1)
    assert "<code>residuals</code>" in missing.group(1)
    assert "This store has no <code>epl</code> group" in html
    assert "all levels composed" in html


def test_residuals_without_epl(tmp_path: pathlib.Path) -> None:
    store = build_store(tmp_path / "res_only.zarr", ("residuals",))
    html = render_report(store, tmp_path / "r.html").read_text(encoding="utf-8")
    images = _images(html)
    assert len(images) == 1 and images[0].startswith(PNG_SIGNATURE)
    assert "exact discrete-Gaussian pmf" in html  # σ² comes from the residuals group
    assert "This store has no <code>accounting</code> group" in html
    assert "This store has no <code>epl</code> group" in html

    bare = build_store(tmp_path / "no_sigma.zarr", ("residuals",), drop=("sigma2",))
    html = render_report(bare, tmp_path / "bare.html").read_text(encoding="utf-8")
    assert len(_images(html)) == 1
    assert "no reference pmf is drawn" in html


def test_store_written_by_the_store_module(tmp_path: pathlib.Path) -> None:
    """A store as the audit writes it: template, region writes, whole groups, root consolidation."""
    from storage import store as st

    url = str(tmp_path / "run.zarr")
    rng = np.random.default_rng(3)
    res = _residuals(rng)
    st.create_residual_template(
        url,
        states=STATES,
        geolevels=LEVELS,
        replicates=res.sizes["replicate"],
        n_items=res.sizes["item"],
        queries=QUERIES,
        sigma2=SIGMA2,
        attrs=_root_attrs(),
    )
    st.write_group(url, "accounting", _accounting())
    st.write_group(url, "epl", _epl(rng))
    st.write_group(url, "accuracy", _accuracy())
    st.finalize(url)
    html = render_report(url, tmp_path / "run.html").read_text(encoding="utf-8")
    assert len(_images(html)) == 5 + len(LEVELS)  # with one EPL(x) surface per level
    missing = re.search(r'<p class="absent" id="missing">(.*?)</p>', html, re.S)
    assert missing is not None and "<code>mpl</code>" in missing.group(1)
    assert "<code>epl</code>" not in missing.group(1)
    assert "all levels composed" in html and "age_38_groups * sex" in html


def test_report_is_the_same_from_either_residual_layout(tmp_path: pathlib.Path) -> None:
    """The same residuals, padded per (state, geolevel) as stores were written before (layout
    1) or each block at its own length on one item axis (layout 2): byte-identical reports."""
    from auditlib.simulate import ResidualBlock
    from storage import store as st

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    old = build_store(tmp_path / "a" / "run.zarr", ("accounting", "residuals"))
    padded = _residuals(np.random.default_rng(7))  # build_store's draws
    counts = padded.n_items.values
    url = str(tmp_path / "b" / "run.zarr")
    st.create_residual_template(
        url,
        states=STATES,
        geolevels=LEVELS,
        replicates=padded.sizes["replicate"],
        n_items=counts,
        queries=QUERIES,
        sigma2=SIGMA2,
        attrs=_root_attrs(),
    )
    for s in range(len(STATES)):
        for g in range(len(LEVELS)):
            n = int(counts[s, g])
            blk = padded.isel(state=s, geolevel=g, item=slice(0, n))
            zeros = np.zeros(n, np.int32)
            block = ResidualBlock(
                blk.residual.values, blk.truth.values, blk.query_index.values, zeros, zeros
            )
            st.write_residual_block(url, s, g, block if n else None)
    st.write_group(url, "accounting", _accounting())
    st.finalize(url)
    assert st.open_group(url, "residuals").residual.dims == ("replicate", "item")
    html_old = render_report(old, tmp_path / "old.html").read_text(encoding="utf-8")
    html_new = render_report(url, tmp_path / "new.html").read_text(encoding="utf-8")
    assert len(_images(html_new)) >= 2
    # apart from the marks every finalized store carries (the old one here was never finalized)
    marks = (
        r'\s*<tr><th scope="row">dpaudit_(complete|metadata_sha256|root_sha256|store)</th>.*</tr>'
    )
    assert re.sub(marks, "", html_new) == html_old


def test_atomic_write_leaves_no_temp_files(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = build_store(tmp_path / "s.zarr", ("accounting",))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "report.html"
    out.write_text("old", encoding="utf-8")
    assert render_report(store, out) == out
    assert sorted(p.name for p in out_dir.iterdir()) == ["report.html"]
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert os.stat(out).st_mode & 0o777 == 0o644

    # a failure before the rename leaves the previous report in place and no temporary file
    out.write_text("old", encoding="utf-8")

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(report.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        render_report(store, out)
    assert sorted(p.name for p in out_dir.iterdir()) == ["report.html"]
    assert out.read_text(encoding="utf-8") == "old"


def test_missing_store_raises(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError):
        render_report(tmp_path / "nope.zarr", tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        # ends agreeing beyond 4 decimals: one number, the digits both ends round to
        (1.2345671, 1.2345893, "1.2346"),
        (20.324689750786, 20.324689750793, "20.3247"),
        (16.74636, 16.74644, "16.7464"),
        (10.00000012, 10.00000019, "10.0000"),
        # wider: one decimal past the first at which the ends differ, rounded outwards
        (0.5, 0.75, "[0.50, 0.75]"),
        (14.53, 16.71, "[14.5, 16.8]"),
        (3.1234, 3.1299, "[3.1234, 3.1299]"),
        (1.99994, 2.00006, "[1.99994, 2.00006]"),  # they round apart at 4 decimals
        (2.0, 2.0, "2 (exact)"),
        (float("nan"), 3.0, "≤ 3"),
    ],
)
def test_fmt_bracket(lo: float, hi: float, expected: str) -> None:
    assert fmt_bracket(lo, hi) == expected


def test_bracket_is_certified() -> None:
    """A printed bracket contains the exact bracket; a single number is what both ends round to."""
    rng = np.random.default_rng(1)
    for _ in range(400):
        lo = float(rng.uniform(0.01, 30.0))
        hi = lo + float(10.0 ** rng.uniform(-12, 0))
        text = fmt_bracket(lo, hi)
        if text.startswith("["):
            a, b = (float(t) for t in text.strip("[]").split(", "))
            assert a <= lo and b >= hi
            # one decimal past the first significant decimal of the width, no more
            assert len(text.split(", ")[0].split(".")[1]) <= math.floor(-math.log10(hi - lo)) + 2
        else:
            decimals = len(text.split(".")[1])
            assert decimals >= 4 and round(lo, decimals) == round(hi, decimals) == float(text)


def test_small_helpers() -> None:
    assert fmt_delta(1e-10) == "1e-10"
    assert fmt_delta(1e-5) == "1e-5"
    assert fmt_delta(2.5e-11) == "2.5e-11"
    k = np.arange(-200, 201)
    p = dg_pmf(k, 30.0)
    assert math.isclose(float(p.sum()), 1.0, rel_tol=1e-12)
    assert p[200] == p.max() and math.isclose(float(p[201] / p[200]), math.exp(-1 / 60))


def test_report_labels_follow_the_stored_epl_knobs() -> None:
    """The interval's level and kind come from the knobs the epl group was computed with."""
    from flows.report.store_data import epl_interval_label
    from flows.spec import parse_spec

    spec = parse_spec({"epl": {"confidence": 0.8, "ci_kind": "percentile", "null_quantile": 0.99}})
    ci, floor_q, ba = epl_interval_label(xr.Dataset(attrs=spec.epl.store_attrs()))
    assert (ci, floor_q) == ("80 % percentile", "99 %")
    assert ba.startswith("bandwidth 0.3 sd")
    # a store written before the knobs were stored: the fixed defaults of that time
    assert epl_interval_label(xr.Dataset())[:2] == ("90 % basic", "95 %")


def _claimed(level: int, query: int) -> float:
    """The estimator on the claimed noise with unlimited residuals, by the documented rule: the
    discrete Gaussian's loss (2x + 1)/(2σ²) at the window's widest x, over 1 + f² (f = 0.3)."""
    reach = int(1.645 * math.sqrt(SIGMA2[level, query]))  # the fixture's window [-reach, reach)
    return (2 * reach - 1) / (2 * SIGMA2[level, query]) / (1 + 0.3**2)


def test_epl_estimates_say_whether_they_are_resolved(full: tuple[pathlib.Path, str]) -> None:
    """An estimate is resolved when its floor is within 10 % of what the claimed noise gives
    with unlimited residuals; otherwise the table names the replicates that resolve it."""
    _, html = full
    table = _between(html, '<table class="epl">', "</table>")
    rows = table.split("<tr")[2:]  # US total, US age × sex, State total, State age × sex, County
    replicates = 2  # the residuals group's replicates (the spec does not set them)
    for q, query in enumerate(QUERIES):
        loss = _claimed(1, q)  # level State
        need = math.ceil(replicates * ((FLOOR[1, q] - loss) / (0.1 * loss)) ** 2)
        assert query in rows[2 + q] and f"within floor; run ≥ {need} replicates" in rows[2 + q]
    # (US, age × sex): floor 0.225 within 10 % of its claimed noise's 0.218, estimate 0.263 above
    assert FLOOR[0, 1] - _claimed(0, 1) <= 0.1 * _claimed(0, 1)
    # a simulated release (the spec's default kind): above its floor says why, never loss
    assert "above floor: estimator effects; resolved" in rows[1]
    # (US, total): its estimate 0.998 above its floor 0.8, which is far above 0.55
    need_us = math.ceil(replicates * ((FLOOR[0, 0] - _claimed(0, 0)) / (0.1 * _claimed(0, 0))) ** 2)
    assert f"above floor: estimator effects; run ≥ {need_us} replicates" in rows[0]
    glance = _between(html, '<table class="glance">', "</table>")
    assert f"not resolved at 2 replicates: run ≥ {need_us}" in glance


def test_resolution_rule_holds_on_the_estimator() -> None:
    """The rule's premise, on the estimator itself: the floor's excess over the claimed noise's
    value shrinks like 1/√n, so the replicates the rule names bring the floor to within about
    10 % of it."""
    from auditlib.epl.bias_aware import estimate_epl
    from auditlib.mechanisms import DiscreteGaussian
    from flows.report.resolution import RESOLUTION, needed_scale

    sigma2, n0 = 10.0, 128
    noise = DiscreteGaussian(sigma2)
    rng = np.random.default_rng(2024)

    def floor_and_limit(n: int) -> tuple[float, float]:
        floors, limits = [], []
        for seed in range(4):
            est = estimate_epl(noise.rvs(n, rng), n_boot=None, n_null=100, seed=seed)
            floors.append(est.null_upper)
            limits.append(est.null_true / (1 + 0.3**2))  # L = L0 / (1 + f²)
        return float(np.mean(floors)), float(np.mean(limits))

    floor0, loss0 = floor_and_limit(n0)
    floor4, loss4 = floor_and_limit(4 * n0)
    ratio = (floor0 - loss0) / (floor4 - loss4)
    assert 1.6 < ratio < 2.5  # 1/√n: 2 for four times the residuals
    scale = needed_scale(floor0 - loss0, loss0)
    assert scale > 4  # not resolved at n0
    floor_n, loss_n = floor_and_limit(math.ceil(n0 * scale))
    assert floor_n - loss_n <= 1.5 * RESOLUTION * loss_n


def test_headline_delta_of_an_older_store_is_the_one_closest_to_1e_10(
    tmp_path: pathlib.Path,
) -> None:
    from flows.report.store_data import headline_delta

    acc = _accounting()
    assert headline_delta(acc) == (1, 1e-10)
    acc.attrs.pop("headline_delta")
    acc = acc.assign_coords(delta=[1e-5, 3e-11])
    assert headline_delta(acc) == (1, 3e-11)
    acc.attrs["headline_delta"] = 1e-5
    assert headline_delta(acc) == (0, 1e-5)
    store = build_store(tmp_path / "s.zarr", ("accounting",))
    html = render_report(store, tmp_path / "r.html").read_text(encoding="utf-8")
    # ★ marks the headline δ's rows of the detailed table, one per level and composed
    assert html.count('headline">') == len(LEVELS) + 1
