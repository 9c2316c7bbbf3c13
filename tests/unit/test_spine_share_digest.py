"""The name a spine is published under on the cluster (``spine_share.digest``) follows every array a
worker reads from it: two spines that differ only in their DHC Prim links (or in whether they have
them) are two names, so a worker can never take one for the other."""

from __future__ import annotations

import dataclasses

import numpy as np

from auditlib.geography.spine import Spine
from flows.audit.spine_share import digest

I32 = np.int32


def _spine(tract_group: list[int]) -> Spine:
    """One state, one county of two Prims, two tracts each with a block group of one block."""
    return Spine(
        state_names=("S1",),
        parents={
            "County": np.array([0], I32),
            "Tract": np.array([0, 0], I32),
            "Block_Group": np.array([0, 1], I32),
            "Block": np.array([0, 1], I32),
        },
        block_population=np.array([3, 5], I32),
        prim_parents={
            "Prim": np.array([0, 0], I32),
            "Tract_Subset_Group": np.array([0, 1], I32),
            "Tract": np.array(tract_group, I32),
        },
    )


def test_the_digest_follows_the_prim_links() -> None:
    a, b = _spine([0, 1]), _spine([0, 0])  # the second tract under the other group
    assert digest(a) == digest(_spine([0, 1]))  # a function of the arrays
    assert digest(a) != digest(b)
    assert digest(a) != digest(dataclasses.replace(a, prim_parents={}))


def test_the_digest_follows_the_levels_and_populations() -> None:
    a = _spine([0, 1])
    moved = dict(a.parents, Block=np.array([1, 1], I32))
    assert digest(a) != digest(dataclasses.replace(a, parents=moved))
    assert digest(a) != digest(dataclasses.replace(a, block_population=np.array([5, 3], I32)))
