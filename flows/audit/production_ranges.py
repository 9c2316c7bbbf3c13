"""A production TopDown state's replicates in ranges (``cluster.replicates_per_task``): each range's
task runs its replicates' sparse TopDown and keeps every level's released histograms (the first
range the true ones too) in the staging store; one task per state then makes its residual blocks
from all of them. A block's items are the cells non-zero in the truth or in *any* replicate
(``auditlib.simulate.sparse_release``), so a block is written once every range is in; the values
stored are those of one task running every replicate (the noise of replicate ``r`` comes from its
own keyed stream). A resumed run reads a finished range back instead of simulating it again; the
group is dropped with the states' kept histograms before the store is published."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from auditlib.geography.sparse_histograms import SparseHistograms
from flows.audit import kept_histograms
from storage.result_store import ResultStore

if TYPE_CHECKING:
    from flows.spec.audit_plan import AuditPlan

#: the staging group of the ranges' histograms: ``{state}-{first replicate}``
PRODUCTION_RANGES = "production_ranges"
_NAMES = ("n_units", "nnz", "indptr", "cells", "counts")


def pack(hists: list[SparseHistograms]) -> dict[str, np.ndarray]:
    """Histograms as five flat arrays (their units, entries, offsets, cells and counts)."""
    return {
        "n_units": np.array([h.n_units for h in hists], np.int64),
        "nnz": np.array([h.nnz for h in hists], np.int64),
        "indptr": np.concatenate([np.asarray(h.indptr, np.int64) for h in hists])
        if hists
        else np.zeros(0, np.int64),
        "cells": np.concatenate([np.asarray(h.cells, np.int32) for h in hists])
        if hists
        else np.zeros(0, np.int32),
        "counts": np.concatenate([np.asarray(h.counts, np.int32) for h in hists])
        if hists
        else np.zeros(0, np.int32),
    }


def unpack(schema_name: str, arrays: dict[str, np.ndarray]) -> list[SparseHistograms]:
    """The histograms :func:`pack` flattened, in order."""
    out, p, e = [], 0, 0
    for n, nnz in zip(arrays["n_units"].tolist(), arrays["nnz"].tolist(), strict=True):
        out.append(
            SparseHistograms(
                schema_name,
                arrays["indptr"][p : p + n + 1].astype(np.int64),
                arrays["cells"][e : e + nnz].astype(np.int32),
                arrays["counts"][e : e + nnz].astype(np.int32),
            )
        )
        p, e = p + n + 1, e + nnz
    return out


def _key(state: int, r0: int) -> str:
    return f"{state}-{r0}"


def save_range(
    store: ResultStore,
    state: int,
    r0: int,
    dps: list[list[SparseHistograms]],
    truth: list[SparseHistograms] | None,
) -> None:
    """Keep a range's released histograms (``dps[replicate][level]``) and, for the first range,
    the true ones (``truth[level]``), its completion attribute last."""
    flat = [h for run in dps for h in run] + (truth or [])
    arrays = pack(flat)
    arrays["shape"] = np.array([len(dps), len(dps[0]) if dps else 0, truth is not None], np.int64)
    kept_histograms.save(store, PRODUCTION_RANGES, _key(state, r0), arrays)


def load_range(
    store: ResultStore, plan: AuditPlan, state: int, replicates: tuple[int, int]
) -> tuple[list[list[SparseHistograms]], list[SparseHistograms] | None] | None:
    """A range's histograms kept by :func:`save_range` (released per replicate and level, and the
    truth if kept), or None if none were kept whole for these replicates."""
    got = kept_histograms.load(store, PRODUCTION_RANGES, _key(state, replicates[0]),
                               (*_NAMES, "shape"))  # fmt: skip
    if got is None:
        return None
    reps, levels, has_truth = (int(x) for x in got["shape"])
    if reps != replicates[1] - replicates[0]:
        return None
    prod = plan.production
    assert prod is not None
    hists = unpack(prod.schema, got)
    dps = [hists[r * levels : (r + 1) * levels] for r in range(reps)]
    return dps, (hists[reps * levels :] if has_truth else None)


def create(store: ResultStore) -> None:
    """The (empty) group, made once by the flow before its range tasks write into it."""
    kept_histograms.create(store, PRODUCTION_RANGES)


def drop(store: ResultStore) -> None:
    """Drop the group (every block is written: no run needs the ranges again)."""
    kept_histograms.drop(store, PRODUCTION_RANGES)
