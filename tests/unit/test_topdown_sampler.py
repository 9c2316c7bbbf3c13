"""TopDown's measurements draw their noise with the named discrete-Gaussian sampler: the table
sampler by default, the reference by ``sampler="reference"``."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms import DiscreteGaussian, DiscreteGaussianTable
from auditlib.simulate.topdown import StateHierarchy, _normal_equations, topdown

QUERIES = {"total": np.ones((1, 4)), "detailed": np.eye(4)}


def _noise(sampler: str | None, sigma2: float, truth: np.ndarray) -> np.ndarray:
    """The noise of a detailed measurement: b·σ² − truth (b = (truth + noise)/σ²)."""
    g = np.random.default_rng(11)
    level = [("detailed", sigma2)]
    if sampler is None:
        _, b = _normal_equations(truth, QUERIES, level, g, {})
    else:
        _, b = _normal_equations(truth, QUERIES, level, g, {}, sampler)  # type: ignore[arg-type]
    return np.rint(b * sigma2 - truth).astype(np.int64)


@pytest.mark.parametrize("sigma2", (2.0, 1896.013681))
def test_measurements_draw_with_the_named_sampler(sigma2: float) -> None:
    truth = np.random.default_rng(0).integers(0, 50, size=(500, 4))
    table = DiscreteGaussianTable(sigma2).rvs(truth.shape, np.random.default_rng(11))
    ref = DiscreteGaussian(sigma2).rvs(truth.shape, np.random.default_rng(11))
    np.testing.assert_array_equal(_noise(None, sigma2, truth), table)  # the default
    np.testing.assert_array_equal(_noise("table", sigma2, truth), table)
    np.testing.assert_array_equal(_noise("reference", sigma2, truth), ref)
    assert not np.array_equal(table, ref)


def test_both_samplers_keep_the_release_invariants() -> None:
    h = StateHierarchy.from_fanouts(("State", "County", "Block"), (3, 20))
    blocks = np.random.default_rng(1).integers(0, 30, size=(60, 4))
    measured = [[("total", 1.2), ("detailed", 10.0)]] * 3
    out = {}
    for sampler in ("table", "reference"):
        rngs = [np.random.default_rng(100 + i) for i in range(3)]
        rel = topdown(h, blocks, QUERIES, measured, rngs, sampler=sampler)  # type: ignore[arg-type]
        assert rel.dp[0].sum() == blocks.sum() and (rel.dp[-1] >= 0).all()
        for i in (1, 2):  # children sum to their parent in every cell
            up = np.zeros_like(rel.dp[i - 1])
            np.add.at(up, h.parents[i - 1], rel.dp[i])
            np.testing.assert_array_equal(up, rel.dp[i - 1])
        out[sampler] = rel.dp[-1]
    assert not np.array_equal(out["table"], out["reference"])


def test_an_unknown_sampler_is_refused() -> None:
    h = StateHierarchy.from_fanouts(("State", "Block"), (2,))
    with pytest.raises(InvalidParameterError, match=r"'exact'.*table, reference"):
        topdown(
            h,
            np.ones((2, 4), dtype=np.int64),
            QUERIES,
            [[("total", 1.0)], [("detailed", 1.0)]],
            [np.random.default_rng(0)] * 2,
            sampler="exact",  # type: ignore[arg-type]
        )
