"""Coverage chunks are pure functions of (seed, cell, repetition), whatever the chunking."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.mpl.coverage import coverage_chunk

KW = {"n": 2_000, "n_confidence": 5_000, "seed": 11}


def test_chunking_does_not_change_the_bounds() -> None:
    whole = coverage_chunk("geometric_count", 0.7, 0, 6, **KW)["lb"]
    parts = np.concatenate(
        [coverage_chunk("geometric_count", 0.7, a, b, **KW)["lb"] for a, b in ((0, 2), (2, 6))]
    )
    np.testing.assert_array_equal(whole, parts)
    other_cell = coverage_chunk("geometric_count", 0.7, 0, 6, cell=(1, 0), **KW)["lb"]
    assert not np.array_equal(whole, other_cell)


def test_targets_are_exact_and_bad_input_is_named() -> None:
    r = coverage_chunk("laplace_broken", 0.5, 0, 1, **KW)
    assert r["claimed_epsilon"] == 0.5 and r["epsilon"] == pytest.approx(1.0)
    with pytest.raises(UnknownNameError, match="Unknown mechanism: 'svt9'"):
        coverage_chunk("svt9", 0.5, 0, 1, **KW)
    with pytest.raises(InvalidParameterError, match=r"Invalid repetitions 3\.\.3"):
        coverage_chunk("laplace", 0.5, 3, 3, **KW)
