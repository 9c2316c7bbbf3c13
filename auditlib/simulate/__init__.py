"""Simulated releases and their residuals (DP − truth)."""

from auditlib.simulate.release import (
    QueryPlan,
    ResidualBlock,
    cell_shares,
    simulate_block,
    true_cell_counts,
)

__all__ = ["QueryPlan", "ResidualBlock", "cell_shares", "simulate_block", "true_cell_counts"]
