"""Certified intervals returned by the accountants."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

METHODS = ("exact-lattice", "bracket-grid")
"""``exact-lattice``: the loss lives exactly on a lattice; only truncation and rounding widen the
interval. ``bracket-grid``: every component's loss was rounded up (upper bound) and down (lower
bound) to a grid, so the interval is also as wide as the grid allows."""


@dataclass(frozen=True)
class Bracket:
    """A certified interval ``lower <= truth <= upper`` (elementwise for arrays).

    ``lower`` errs low and ``upper`` errs high, always; neither is an estimate. ``quantity`` says what
    is bracketed (``"delta"`` for delta(eps), ``"epsilon"`` for eps(delta)), ``method`` which mode
    produced it (see :data:`METHODS`), ``truncated_mass`` the probability mass the lattice dropped
    (already inside ``upper``) and ``grid`` the lattice step in loss units.
    """

    lower: np.ndarray | float
    upper: np.ndarray | float
    method: str
    quantity: str = "delta"
    truncated_mass: float = 0.0
    grid: float = 0.0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if np.any(np.asarray(self.lower) > np.asarray(self.upper)):
            raise ValueError("a bracket needs lower <= upper")

    @property
    def width(self) -> np.ndarray | float:
        """``upper - lower`` (rounded up by at most one float)."""
        w = np.asarray(self.upper) - np.asarray(self.lower)
        return float(w) if np.ndim(w) == 0 else w

    @property
    def midpoint(self) -> np.ndarray | float:
        """Centre of the interval: a point estimate that errs by at most ``width / 2``."""
        m = 0.5 * (np.asarray(self.upper) + np.asarray(self.lower))
        return float(m) if np.ndim(m) == 0 else m

    def contains(self, value: np.ndarray | float) -> bool:
        """Whether every ``value`` lies in ``[lower, upper]``."""
        v = np.asarray(value)
        return bool(np.all((np.asarray(self.lower) <= v) & (v <= np.asarray(self.upper))))
