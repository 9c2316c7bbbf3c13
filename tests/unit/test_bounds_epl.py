"""Size bounds of the EPL estimate: bootstrap and reference draws, and the bootstrap's memory.

Each bound is refused at once — within a second, without allocating (``tests/unit/_bounds.py``) —
naming the value given and the largest allowed; a value at the bound is accepted where that is
cheap to show.
"""

from __future__ import annotations

import re

import numpy as np

from auditlib.epl.bias_aware import estimate_epl
from auditlib.epl.settings import MAX_DRAWS
from auditlib.mechanisms import DiscreteGaussian
from tests.unit._bounds import refused


def test_epl_draws_are_bounded() -> None:
    r = DiscreteGaussian(4.0).rvs(2_000, np.random.default_rng(2))
    refused(
        lambda: estimate_epl(r, n_boot=MAX_DRAWS + 1, seed=1), f"Invalid n_boot: {MAX_DRAWS + 1}"
    )
    refused(lambda: estimate_epl(r, n_null=10**9, seed=1), "Invalid n_null: 1000000000")
    # a wide window: 100,000 curves over its query points would pass 4 GiB
    wide = DiscreteGaussian(4.0e6).rvs(2_000, np.random.default_rng(2))
    msg = refused(
        lambda: estimate_epl(wide, n_boot=100_000, n_null=None, seed=1),
        "Invalid n_boot: 100000",
        "GiB",
    )
    most = int(re.search(r"the largest allowed here is (\d+)", msg).group(1))  # type: ignore[union-attr]
    assert 0 < most < 100_000
