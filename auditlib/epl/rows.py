"""One EPL summary row per query from streamed histograms: what an audit stores per (state,
geolevel, query) and pooled over states.

:func:`epl_rows` gives, for each query's :class:`~auditlib.epl.stream.LatticeHistogram`, the same
row :func:`auditlib.summaries.epl_by_query` gives from that query's residuals held in memory — the
EPL of ``method`` (Flaxman & Petti by default), with ``uncertainty_seed`` the bias-aware estimate
with its bootstrap interval, floor and 1/σ² estimate, with ``surface_seed`` the EPL(x) surface —
seeded per query the same way, so the numbers agree (tests/unit/test_epl_rows.py). A binned
histogram (non-integer residuals) adds ``kde_error``, the bound on the KDE's relative error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from auditlib.epl.default import estimate_epl
from auditlib.epl.estimator import epl
from auditlib.epl.stream import LatticeHistogram
from auditlib.epl.surface import SURFACE_POINTS, epl_surface


def epl_rows(
    hists: Sequence[LatticeHistogram | None],
    *,
    bandwidth_factor: float,
    percentiles: tuple[float, float],
    method: str = "flaxman_petti",
    uncertainty_seed: int | None = None,
    surface_seed: int | None = None,
    surface_points: int = SURFACE_POINTS,
) -> list[dict[str, Any] | None]:
    """EPL row of each query's histogram (``None`` where the query has no residuals)."""
    out: list[dict[str, Any] | None] = []
    for q, hist in enumerate(hists):
        if hist is None or hist.n == 0:
            out.append(None)
            continue
        res = epl(hist, method=method, bandwidth_factor=bandwidth_factor, percentiles=percentiles)
        row: dict[str, Any] = {
            "epl": float(res.epl),
            "status": res.status,
            "n": int(res.n),
            "bandwidth": float(res.bandwidth),
            "x": np.asarray(res.x, dtype=float),
            "epl_x": np.asarray(res.epl_x, dtype=float),
        }
        if hist.binned and np.isfinite(res.bandwidth) and res.bandwidth > 0:
            row["kde_error"] = hist.kde_error(res.bandwidth)
        if uncertainty_seed is not None:
            seq = np.random.SeedSequence(uncertainty_seed, spawn_key=(q,))
            est = estimate_epl(hist, percentiles=percentiles, seed=seq)
            row.update(
                {
                    "bias_aware": float(est.epl),
                    "ci_low": float(est.ci_low),
                    "ci_high": float(est.ci_high),
                    "null_upper": float(est.null_upper),
                    "inv_sigma2_hat": float(est.inv_sigma2_hat),
                }
            )
        if surface_seed is not None:
            seq = np.random.SeedSequence(surface_seed, spawn_key=(q,))
            surf = epl_surface(hist, percentiles=percentiles, max_points=surface_points, seed=seq)
            row["surface"] = surf.to_arrays()
        out.append(row)
    return out
