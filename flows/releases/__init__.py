"""Release kinds as strategies (:class:`~flows.releases.base.Release`): one class per kind, chosen
once by ``flows.spec.plan.make_plan`` and held by the plan (``plan.strategy``)."""

from flows.releases.allocation import AllocationRelease
from flows.releases.base import BATCHED_BLOCKS, SPARSE_STATES, TOPDOWN_STATES, Release
from flows.releases.geometric import FlaxmanTreeRelease, GeometricRelease, TableTreeRelease
from flows.releases.observed import ObservedRelease
from flows.releases.published import PublishedErrorsRelease
from flows.releases.sparse_topdown import SparseTopDownRelease
from flows.releases.stratified import StratifiedRelease
from flows.releases.topdown import SpineTopDownRelease, TableTopDownRelease, TopDownRelease

__all__ = [
    "BATCHED_BLOCKS",
    "SPARSE_STATES",
    "TOPDOWN_STATES",
    "AllocationRelease",
    "FlaxmanTreeRelease",
    "GeometricRelease",
    "ObservedRelease",
    "PublishedErrorsRelease",
    "Release",
    "SparseTopDownRelease",
    "SpineTopDownRelease",
    "StratifiedRelease",
    "TableTopDownRelease",
    "TableTreeRelease",
    "TopDownRelease",
]
