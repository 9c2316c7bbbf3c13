"""The audit's exact accounting, reused from the persistent result cache (:mod:`storage.result_cache`).

A result is keyed by the allocation's bytes (a shipped id's file or an allocation file), its exact
noise components, the neighbour relation, universe, region, geolevel, the δ, ε and α grids, the
calibration δ* and the accounting code's version; any change gives a new key.
"""

from __future__ import annotations

import hashlib
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from auditlib.allocations import ALLOCATION_FILES
from auditlib.summaries import account_components
from storage import result_cache

KIND = "account"


def allocation_digest(allocation: str) -> str:
    """SHA-256 of the allocation's file: the shipped id's, or the file at the path given."""
    if allocation in ALLOCATION_FILES:
        data = (
            resources.files("auditlib") / "data" / "allocations" / ALLOCATION_FILES[allocation]
        ).read_bytes()
    else:
        data = Path(allocation).read_bytes()
    return hashlib.sha256(data).hexdigest()


def _component_key(component: Any) -> list[Any]:
    """A (σ², count) pair as ``[σ², count]`` (exact); a loss component as its mechanism, exact
    parameter and count."""
    if isinstance(component, tuple):
        s, m = component
        return [str(Fraction(s)), int(m)]
    name, value = component.key
    return [name, str(value), int(component.count)]


def account_key(
    allocation: str,
    neighbours: str,
    universe: str,
    region: str,
    geolevel: str | None,
    components: list[Any],
    deltas: list[float],
    eps_grid: np.ndarray,
    alpha_grid: np.ndarray | None,
    calibration_delta: float | None,
) -> str:
    """The cache key of one :func:`auditlib.summaries.account_components` result."""
    inputs = {
        "allocation": allocation_digest(allocation),
        "neighbours": neighbours,
        "universe": universe,
        "region": region,
        "geolevel": geolevel,
        "components": [_component_key(c) for c in components],
        "deltas": [float(d).hex() for d in deltas],
        "eps_grid": result_cache.array_digest(np.asarray(eps_grid, dtype=float)),
        "alpha_grid": None
        if alpha_grid is None
        else result_cache.array_digest(np.asarray(alpha_grid, dtype=float)),
        "calibration_delta": None if calibration_delta is None else float(calibration_delta).hex(),
    }
    return result_cache.result_key(KIND, inputs)


def account_cached(
    allocation: str,
    neighbours: str,
    universe: str,
    region: str,
    geolevel: str | None,
    components: list[Any],
    deltas: list[float],
    eps_grid: np.ndarray,
    alpha_grid: np.ndarray | None = None,
    calibration_delta: float | None = None,
    *,
    use_cache: bool = True,
) -> dict[str, Any]:
    """:func:`account_components`, answered from the cache when an intact entry exists (and
    stored there after computing); ``use_cache=False`` neither reads nor writes the cache."""
    if not use_cache:
        return account_components(components, deltas, eps_grid, alpha_grid, calibration_delta)
    key = account_key(
        allocation,
        neighbours,
        universe,
        region,
        geolevel,
        components,
        deltas,
        eps_grid,
        alpha_grid,
        calibration_delta,
    )
    hit = result_cache.load(key)
    if hit is not None:
        return hit
    out = account_components(components, deltas, eps_grid, alpha_grid, calibration_delta)
    try:
        result_cache.save(key, out)
    except OSError:  # a read-only or full cache directory only costs the reuse
        pass
    return out
