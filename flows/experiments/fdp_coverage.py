"""Coverage of the empirical f-DP points as a flow: mechanisms × parameters × repetition chunks
fanned out on Dask, resumable like the MPL coverage flow (:mod:`flows.experiments.mpl_coverage`).

Each task runs one chunk of repetitions of one (mechanism, parameter) cell of
:data:`auditlib.mpl.tradeoff_coverage.TRADEOFF_CATALOGUE` with both bands on the same draws
(:func:`~auditlib.mpl.tradeoff_coverage.tradeoff_coverage`) and writes its per-repetition results
and its done-marker to the ``fdp_coverage_parts`` group of the staging store; the flow then writes
the Zarr group ``fdp_coverage``: per (mechanism, parameter, band, rep) whether every certified
point lies on or above the true curve (``covered``), the plug-in points' coverage on the same draws,
the lower bounds on μ and ε (δ = 0) and whether they refute the claim; per cell the true and claimed
μ and ε, and the shares over repetitions. A repetition's draws are keyed by (seed, cell, rep): the
numbers do not depend on the chunking, the workers or a resume.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from prefect import flow, task

from auditlib.mpl.rates import Band
from auditlib.mpl.tradeoff_coverage import known_tradeoff, refutes, tradeoff_coverage
from flows.audit.tasks import TASK_OPTS
from flows.experiments.chunked import grid_chunks, repetition_chunks, run_chunked, run_id_of
from storage.result_store import ResultStore

GROUP = "fdp_coverage"
#: the per-chunk results of an unfinished run (staging only; assembled into GROUP, then removed)
PARTS = "fdp_coverage_parts"
#: the bands every repetition is certified with (paired: the same draws)
BANDS: tuple[Band, ...] = ("clopper-pearson", "dkw")
_PER_REP = {  # name -> dtype of the (mechanism, parameter, band, rep) arrays
    "covered": "bool",
    "plugin_covered": "bool",
    "mu_lower": "float64",
    "epsilon_lower": "float64",
    "refuted": "bool",
}
_PER_CELL = ("mu", "epsilon", "claimed_mu", "claimed_epsilon")


def fdp_coverage_run_id(
    mechanisms: list[str],
    parameters: list[float],
    repetitions: int,
    n_select: int,
    n: int,
    conf: float,
    tests: int,
    seed: int,
    chunk: int,
) -> str:
    """The run id of what determines the numbers and the chunking (not the store or cluster)."""
    key: list[Any] = ["fdp-coverage", list(mechanisms), [float(p) for p in parameters]]
    return run_id_of([*key, repetitions, n_select, n, float(conf), tests, seed, chunk])


@task(name="fdp-chunk", **TASK_OPTS)
def fdp_chunk(
    store: ResultStore,
    name: str,
    parameter: float,
    start: int,
    stop: int,
    cell: tuple[int, int],
    index: int,
    settings: dict[str, Any],
) -> int:
    """Run repetitions ``start..stop-1`` of one cell and write them as chunk ``index`` (its marker
    last); returns the number of repetitions."""
    known = known_tradeoff(name, parameter)
    r = tradeoff_coverage(known, start, stop, cell=cell, bands=BANDS, **settings)
    mi, pi = cell
    reps = (mi, pi, slice(None), slice(start, stop))
    one = (mi, pi, slice(index, index + 1))
    values: dict[str, tuple[tuple[int | slice, ...], np.ndarray]] = {}
    for k, dtype in _PER_REP.items():
        if k == "refuted":
            rows = [
                [
                    refutes(known, m, e)
                    for m, e in zip(r[b]["mu_lower"], r[b]["epsilon_lower"], strict=True)
                ]
                for b in BANDS
            ]
        else:
            rows = [r[b][k] for b in BANDS]
        values[k] = (reps, np.asarray(rows, dtype=dtype))
    for k in _PER_CELL:
        values[k] = (one, np.array([r[k]], dtype=float))
    store.write_part(PARTS, (mi, pi, index), values)
    return stop - start


@flow(name="dpaudit-fdp-coverage", validate_parameters=False)
def fdp_coverage_flow(
    store: ResultStore | str,
    mechanisms: list[str],
    parameters: list[float],
    repetitions: int,
    n_select: int = 20_000,
    n: int = 100_000,
    conf: float = 0.95,
    tests: int = 32,
    seed: int = 2026,
    chunk: int = 10,
) -> dict[str, Any]:
    """Resumable: each chunk writes its results and done-marker to ``fdp_coverage_parts`` as it
    finishes; a re-run on the same store computes only the chunks not marked done, then assembles
    the ``fdp_coverage`` group and removes the parts."""
    settings = {"n_select": n_select, "n": n, "conf": conf, "tests": tests, "seed": seed}
    run_id = fdp_coverage_run_id(
        mechanisms, parameters, repetitions, n_select, n, conf, tests, seed, chunk
    )
    shape = (len(mechanisms), len(parameters))
    ranges = repetition_chunks(repetitions, chunk)
    rep, grid = (*shape, len(BANDS), repetitions), (*shape, len(ranges))
    layout: dict[str, tuple[tuple[int, ...], tuple[int, ...], str]] = {
        k: (rep, (1, 1, len(BANDS), chunk), d) for k, d in _PER_REP.items()
    }
    layout.update({k: (grid, (1, 1, 1), "float64") for k in _PER_CELL})
    chunks = grid_chunks(
        mechanisms,
        parameters,
        ranges,
        lambda name, p, start, stop: f"fdp {name} {p:g} reps {start}-{stop - 1}",
        settings,
    )

    def assemble(parts: dict[str, np.ndarray]) -> xr.Dataset:
        return fdp_coverage_dataset(parts, mechanisms, parameters, settings)

    run = run_chunked(store, run_id, GROUP, PARTS, layout, grid, chunks, fdp_chunk, assemble)
    return {"cells": shape[0] * shape[1], **run.counts()}


def fdp_coverage_dataset(
    parts: dict[str, np.ndarray],
    mechanisms: list[str],
    parameters: list[float],
    settings: dict[str, Any],
) -> xr.Dataset:
    """The ``fdp_coverage`` group from the assembled parts (every chunk's values; per-cell values
    taken from the first chunk, as every chunk of a cell writes the same ones)."""
    per_rep = ("mechanism", "parameter", "band", "rep")
    cell_dims = ("mechanism", "parameter")
    data: dict[str, Any] = {k: (per_rep, parts[k].astype(d)) for k, d in _PER_REP.items()}
    data.update({k: (cell_dims, parts[k][:, :, 0]) for k in _PER_CELL})
    share = ("mechanism", "parameter", "band")
    data["coverage"] = (share, parts["covered"].astype(bool).mean(axis=-1))
    data["plugin_coverage"] = (share, parts["plugin_covered"].astype(bool).mean(axis=-1))
    data["detection"] = (share, parts["refuted"].astype(bool).mean(axis=-1))
    data["median_mu_lower"] = (share, np.median(parts["mu_lower"], axis=-1))
    data["median_epsilon_lower"] = (share, np.median(parts["epsilon_lower"], axis=-1))
    return xr.Dataset(
        data,
        coords={
            "mechanism": np.array(mechanisms, dtype=object),
            "parameter": np.asarray(parameters, dtype=float),
            "band": np.array(BANDS, dtype=object),
            "rep": np.arange(parts["covered"].shape[-1]),
        },
        attrs={
            **settings,
            "method": "empirical f-DP points (auditlib.mpl.tradeoff_lower): tests selected on "
            "n_select draws per input, certified on n fresh draws per input, every point at "
            "confidence conf (Clopper-Pearson with Bonferroni, or DKW)",
            "parameter": "mu for the gaussian and dg_count entries, epsilon for laplace and "
            "randomized response; *_broken entries claim it and truly have 1.5 times it",
            "coverage": "share of repetitions whose every certified point lies on or above the "
            "true trade-off curve; expected >= conf",
            "plugin_coverage": "the same for the plug-in points on the same draws (far below conf: "
            "the check can fail)",
            "detection": "share of repetitions whose mu or epsilon lower bound exceeds the claim "
            "(a detection for broken entries; at most 1 - conf for correct ones)",
        },
    )
