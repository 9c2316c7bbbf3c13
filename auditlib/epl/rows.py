"""One EPL summary row per query from streamed histograms: what an audit stores per (state,
geolevel, query) and pooled over states.

:func:`epl_rows` gives, for each query's :class:`~auditlib.epl.stream.LatticeHistogram`, the same
row :func:`auditlib.summaries.epl_by_query` gives from that query's residuals held in memory — the
EPL of ``method`` (Flaxman & Petti by default), with ``uncertainty_seed`` the bias-aware estimate
with its bootstrap interval, floor and 1/σ² estimate, with ``surface_seed`` the EPL(x) surface —
seeded per query the same way, so the numbers agree (tests/unit/test_epl_geolevel_stream.py).
``bias_aware`` (:class:`~auditlib.epl.settings.BiasAwareSettings`) sets the bias-aware estimate's
and the surface's knobs; by default those of :func:`~auditlib.epl.estimate_epl`, on the window
``percentiles``. ``kde_error`` bounds the relative error of every KDE in the row (the largest over
the bandwidths used): 0 for exact histograms (integer residuals, values on the lattice), the
binned KDE's bound otherwise (non-integer residuals), NaN when no KDE was evaluated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from auditlib.epl.bias_aware import EPLEstimate, estimate_epl
from auditlib.epl.estimator import EPLResult, epl
from auditlib.epl.settings import BiasAwareSettings
from auditlib.epl.stream import LatticeHistogram
from auditlib.epl.surface import SURFACE_POINTS, epl_surface


@dataclass(frozen=True)
class EPLKnobs:
    """The settings an audit's EPL rows are computed with, held once: Flaxman–Petti's
    ``bandwidth_factor`` (h / sd), its window ``percentiles`` and ``range_multiplier``, and the
    bias-aware estimate's and surfaces' ``bias_aware`` settings (default: the library's). The
    spec's ``[epl]`` section gives them (``spec.epl.knobs()``)."""

    bandwidth_factor: float
    percentiles: tuple[float, float]
    range_multiplier: float = 1.0
    bias_aware: BiasAwareSettings = field(default_factory=BiasAwareSettings)

    def rows_kwargs(self) -> dict[str, Any]:
        """These settings as the keyword arguments of :func:`epl_rows`."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def epl_rows(
    hists: Sequence[LatticeHistogram | None],
    *,
    bandwidth_factor: float,
    percentiles: tuple[float, float],
    method: str = "flaxman_petti",
    range_multiplier: float = 1.0,
    bias_aware: BiasAwareSettings | None = None,
    uncertainty_seed: int | None = None,
    surface_seed: int | None = None,
    surface_points: int = SURFACE_POINTS,
    references: Sequence[Any] | None = None,
) -> list[dict[str, Any] | None]:
    """EPL row of each query's histogram (``None`` where the query has no residuals);
    ``references`` (per query, or ``None``) puts a query's floor at its declared noise
    (:func:`~auditlib.epl.estimate_epl`'s ``null_reference``)."""
    ba = bias_aware if bias_aware is not None else BiasAwareSettings()
    out: list[dict[str, Any] | None] = []
    for q, hist in enumerate(hists):
        if hist is None or hist.n == 0:
            out.append(None)
            continue
        res = epl(
            hist,
            method=method,
            bandwidth_factor=bandwidth_factor,
            percentiles=percentiles,
            range_multiplier=range_multiplier,
        )
        row = epl_row(res)
        widths = [res.bandwidth]
        if uncertainty_seed is not None:
            seq = np.random.SeedSequence(uncertainty_seed, spawn_key=(q,))
            ref = references[q] if references is not None else None
            est = estimate_epl(
                hist, seed=seq, null_reference=ref, **ba.estimate_kwargs(percentiles)
            )
            widths.append(est.bandwidth)
            row.update(bias_aware_row(est))
        if surface_seed is not None:
            seq = np.random.SeedSequence(surface_seed, spawn_key=(q,))
            surf = epl_surface(
                hist, max_points=surface_points, seed=seq, **ba.surface_kwargs(percentiles)
            )
            row["surface"] = surf.to_arrays()
            widths.append(surf.bandwidth)
        row["kde_error"] = _kde_error(hist, widths)
        out.append(row)
    return out


def epl_row(res: EPLResult) -> dict[str, Any]:
    """A query's row of its EPL estimate: the EPL, its status, n, the bandwidth and the curve."""
    return {
        "epl": float(res.epl),
        "status": res.status,
        "n": int(res.n),
        "bandwidth": float(res.bandwidth),
        "x": np.asarray(res.x, dtype=float),
        "epl_x": np.asarray(res.epl_x, dtype=float),
    }


def bias_aware_row(est: EPLEstimate) -> dict[str, float]:
    """The bias-aware estimate's entries of a row: the EPL, its interval, floor and 1/σ² estimate."""
    return {
        "bias_aware": float(est.epl),
        "ci_low": float(est.ci_low),
        "ci_high": float(est.ci_high),
        "null_upper": float(est.null_upper),
        "inv_sigma2_hat": float(est.inv_sigma2_hat),
    }


def _kde_error(hist: LatticeHistogram, widths: Sequence[float]) -> float:
    """The largest KDE error bound of ``hist`` over the bandwidths used (NaN if none was)."""
    used = [float(h) for h in widths if np.isfinite(h) and h > 0]
    return max(hist.kde_error(h) for h in used) if used else float("nan")
