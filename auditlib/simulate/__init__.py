"""Simulated releases and their residuals (DP − truth)."""

from auditlib.simulate.hierarchical import (
    CountTree,
    HierarchicalRelease,
    adpc,
    gdpc,
    rdpc,
    simulate_residuals,
)
from auditlib.simulate.neighbours import NeighbourPair, direct_samples
from auditlib.simulate.release import (
    QueryPlan,
    ResidualBlock,
    ResidualParts,
    cell_shares,
    simulate_block,
    true_cell_counts,
)

__all__ = ["QueryPlan", "ResidualBlock", "ResidualParts", "cell_shares", "simulate_block"]
__all__ += ["true_cell_counts"]
__all__ += [  # Flaxman's GDPC / RDPC / ADPC and neighbouring databases
    "CountTree",
    "HierarchicalRelease",
    "NeighbourPair",
    "adpc",
    "direct_samples",
    "gdpc",
    "rdpc",
    "simulate_residuals",
]
