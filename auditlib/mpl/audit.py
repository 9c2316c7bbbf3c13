"""MPL of one geolevel's release, for the audit store's ``mpl`` group (one Prefect task each).

The mechanism under test is one released cell count of the geolevel: the least noisy query of the
allocation at that geolevel (largest ρ_q; or a named query), σ² under the run's neighbour relation,
optionally clipped at 0 (the run's ``postprocess``) — or Flaxman's GDPC leaf count. The pairs are D
vs D′ with one person added to the cell's unit, removed from it, or moved into it
(:mod:`auditlib.mpl.census`), the region C the integers within ``radius_sd``·σ of the count. The
result holds everything the store keeps (``storage/schema.py``): LB and its ingredients, the loss
curves, the flags, the exact ε*_C and the hockey-stick δ(ε) (estimate, lower bound, exact); with
``fdp`` also the empirical f-DP points of the best pair (:func:`fdp_points`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError
from auditlib.mpl.catalogue import KnownMechanism
from auditlib.mpl.census import allocation_query_count, gdpc_count
from auditlib.mpl.hockey import hockey_stick_exact
from auditlib.mpl.mpl import mpl_known
from auditlib.mpl.tradeoff_lower import tradeoff_lower

MPL_AUDIT = 21  # stream id: (MPL_AUDIT, geolevel index)
MPL_FDP = 22  # stream id of the empirical f-DP points: (MPL_FDP, geolevel index)
EXACT_SUPPORT_SD = 40.0  # the exact δ sums the output laws over count ± 40σ (tails < 1e-300)


def geolevel_mechanism(
    *,
    release: str,
    allocation: str,
    geolevel: str,
    neighbours: str,
    universe: str,
    region: str,
    query: str | None,
    count: int,
    pairs: Sequence[str],
    radius_sd: float,
    postprocess: str,
    release_epsilon: float,
) -> KnownMechanism:
    """The census release of one geolevel as a catalogue entry with exact ε*_C."""
    if release == "allocation":
        return allocation_query_count(
            allocation,
            geolevel,
            query or None,
            neighbours=neighbours,
            universe=universe,
            region=region,
            count=count,
            pairs=pairs,
            radius_sd=radius_sd,
            postprocess=postprocess,
        )
    if release == "gdpc":
        return gdpc_count(release_epsilon, count=count, pairs=pairs)
    raise InvalidParameterError(
        f"Invalid release: {release!r}; MPL in the audit tests 'allocation' or 'gdpc' releases."
    )


def mpl_geolevel(
    geolevel: str,
    geolevel_index: int,
    *,
    seed: int,
    n: int,
    n_confidence: int,
    alpha: float,
    tau: float,
    delta_epsilons: Sequence[float],
    fdp: bool = False,
    **mechanism: Any,
) -> dict[str, Any]:
    """Run MPL on the geolevel's census release; return the numbers and curves the store keeps."""
    e = geolevel_mechanism(geolevel=geolevel, **mechanism)
    rng = seeds.rng(seed, MPL_AUDIT, geolevel_index)
    r = mpl_known(
        e, n, n_confidence, rng, alpha=alpha, tau=tau, delta_epsilons=list(delta_epsilons)
    )
    c = r.confidence
    hs = r.hockey_stick
    assert hs is not None
    delta_exact = np.full(len(delta_epsilons), np.nan)
    if e.log_pmf is not None:
        a, b = e.pairs[r.best]
        sd = math.sqrt(getattr(e.mechanism.sampler, "sigma2", math.nan))
        width = int(EXACT_SUPPORT_SD * (sd if math.isfinite(sd) else 10.0)) + 10
        c0 = int(e.region.points[len(e.region.points) // 2])
        t = np.arange(c0 - width, c0 + width + 1, dtype=np.int64)
        delta_exact = hockey_stick_exact(e.log_pmf(a, t), e.log_pmf(b, t), delta_epsilons)
    bws = r.bandwidths
    nb = len(e.pairs)
    return {
        "geolevel": geolevel,
        "name": e.mechanism.name,
        "sigma2": float(getattr(e.mechanism.sampler, "sigma2", math.nan)),
        "count": int(mechanism["count"]),
        "lb": r.lb,
        "eps_hat": r.eps_hat_max,
        "t_hat": float(r.t_hat_max),
        "best_pair": r.best,
        "loss_star": c.loss,
        "f_x": c.f_x,
        "f_x_prime": c.f_x_prime,
        "sigma_hat": c.sigma_hat,
        "c_n": c.c_n,
        "bandwidth": math.nan if c.bandwidth is None else c.bandwidth,
        "floor_driven": r.floor_driven,
        "edge": r.edge,
        "sparse_support": r.sparse_support,
        "epsilon_c": e.epsilon_c,
        "eps_hat_pair": np.asarray(r.eps_hat, dtype=np.float64),
        "t_hat_pair": np.asarray(r.t_hat, dtype=np.float64),
        "bandwidth_x": np.full(nb, np.nan) if bws is None else bws[:, 0],
        "bandwidth_x_prime": np.full(nb, np.nan) if bws is None else bws[:, 1],
        "loss_t": np.asarray(e.region.points, dtype=np.float64),
        "loss_curve": r.loss_curves,
        "delta_hat": hs.delta_hat,
        "delta_lb": hs.delta_lb,
        "delta_exact": np.asarray(delta_exact, dtype=np.float64),
        **(
            fdp_points(e, r.best, seed, geolevel_index, n=n, n_confidence=n_confidence, alpha=alpha)
            if fdp
            else {}
        ),
    }


def fdp_points(
    e: KnownMechanism,
    pair: int,
    seed: int,
    geolevel_index: int,
    *,
    n: int,
    n_confidence: int,
    alpha: float,
) -> dict[str, Any]:
    """Certified points above the trade-off curve T(A(D), A(D′)) of the count, pair ``pair``.

    Own keyed draws (stream :data:`MPL_FDP`): ``n`` per input select the threshold tests,
    ``n_confidence`` fresh ones certify them at confidence 1 − ``alpha``
    (:func:`~auditlib.mpl.tradeoff_lower.tradeoff_lower`, Clopper–Pearson). With probability
    ≥ 1 − alpha every point has β_u ≥ T(α_u): the points err high, ``fdp_mu_lower`` errs low.
    """
    x, x_prime = e.pairs[pair]
    pts = tradeoff_lower(
        e.mechanism,
        x,
        x_prime,
        n_select=n,
        n=n_confidence,
        rng=seeds.rng(seed, MPL_FDP, geolevel_index),
        conf=1.0 - alpha,
    )
    return {
        "fdp_alpha_upper": pts.alpha_upper,
        "fdp_beta_upper": pts.beta_upper,
        "fdp_alpha_hat": pts.alpha_hat,
        "fdp_beta_hat": pts.beta_hat,
        "fdp_mu_lower": pts.mu_lower(),
    }
