"""Accounting sweep: every shipped allocation × universe × region × geolevel × neighbour relation.

One Prefect task per (allocation, universe, region, neighbours, level) job — a level, or ``composed``
(all levels of the run), or, per region, ``persons+units`` composed, and, when every released product
is swept, their cumulative composition (allocation ``pl94_2021_production+dhc_2023_production``) —
fanned out on Dask. Each task
returns a few arrays; the flow writes one Zarr group ``accounting_sweep`` with dims
(job, delta) and (job, eps_grid) and the job's labels as coordinates, so notebooks select with
``ds.isel(job=(ds.allocation == "pl94_2021_production").values)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from prefect import flow, task

from auditlib.accounting import bureau_epsilon
from auditlib.allocations import (
    RELEASED_PRODUCTS,
    allocation_digest,
    allocation_label,
    cumulative_components,
    load_allocation,
)
from auditlib.summaries import account_components
from flows.audit.tasks import TASK_OPTS
from flows.experiments.chunked import Chunk, run_chunked, run_id_of
from storage.result_store import ResultStore

GROUP = "accounting_sweep"
COMPOSED = "composed"
ALL_UNIVERSES = "persons+units"
CUMULATIVE = "+".join(RELEASED_PRODUCTS)
"""Allocation label of the cumulative job: every released product, persons and units composed."""


@dataclass(frozen=True)
class Job:
    allocation: str
    universe: str  # a universe, or "persons+units"
    region: str
    neighbours: str
    geolevel: str  # a geolevel or "composed"

    @property
    def label(self) -> str:
        return f"{self.allocation}/{self.universe}/{self.region}/{self.neighbours}/{self.geolevel}"


def plan_jobs(allocations: list[str], neighbours: list[str], levels: bool = True) -> list[Job]:
    jobs = []
    for a in allocations:
        alloc = load_allocation(a)
        regions = dict.fromkeys(r for u in alloc.universes() for r in alloc.regions(u))
        for nb in neighbours:
            for region in regions:
                unis = [u for u in alloc.universes() if region in alloc.regions(u)]
                for u in unis:
                    if levels:
                        jobs += [Job(a, u, region, nb, g) for g in alloc.geolevels(u, region)]
                    jobs.append(Job(a, u, region, nb, COMPOSED))
                if len(unis) > 1:
                    jobs.append(Job(a, ALL_UNIVERSES, region, nb, COMPOSED))
    if all(p in allocations for p in RELEASED_PRODUCTS):
        common = set.intersection(
            *(
                {r for u in load_allocation(p).universes() for r in load_allocation(p).regions(u)}
                for p in RELEASED_PRODUCTS
            )
        )
        for nb in neighbours:
            for region in sorted(common, key=lambda r: (r != "US", r)):
                jobs.append(Job(CUMULATIVE, ALL_UNIVERSES, region, nb, COMPOSED))
    return jobs


def job_components(job: Job) -> list[tuple[Any, int]]:
    if job.allocation == CUMULATIVE:
        return cumulative_components(RELEASED_PRODUCTS, job.neighbours, job.region)
    alloc = load_allocation(job.allocation)
    level = None if job.geolevel == COMPOSED else job.geolevel
    unis = (
        [u for u in alloc.universes() if job.region in alloc.regions(u)]
        if job.universe == ALL_UNIVERSES
        else [job.universe]
    )
    # discrete Gaussian (σ², count) pairs, or loss components of an allocation file's mixed noise
    parts = [alloc.accounting_components(job.neighbours, u, job.region, level) for u in unis]
    return [c for part in parts for c in part]


#: the per-job results of an unfinished run (staging only; assembled into GROUP, then removed)
PARTS = "accounting_sweep_parts"
_SCALARS = {
    "rho": "float64",
    "n_queries": "int64",
    "sigma2_min": "float64",
    "sigma2_max": "float64",
}
_PER_DELTA = ("eps_exact_lower", "eps_exact_upper", "eps_bureau", "eps_cks")
_PER_EPS = ("delta_exact_upper", "delta_bureau")


def sweep_run_id(
    allocations: list[str], neighbours: list[str], deltas: list[float], eps_grid_points: int
) -> str:
    """The run id of what determines the numbers (not the store or the cluster)."""
    key: list[Any] = [
        list(allocations),
        list(neighbours),
        [float(d) for d in deltas],
        eps_grid_points,
    ]
    digests = [d for a in allocations if a != CUMULATIVE and (d := allocation_digest(a))]
    if digests:  # allocation files: their content counts, not only their paths
        key.append(digests)
    return run_id_of(key)


@task(name="account-job", **TASK_OPTS)
def account_job(
    store: ResultStore, index: int, job: Job, deltas: list[float], eps_grid: np.ndarray
) -> None:
    """Account one job and write its results as entry ``index`` of the parts group, marker last."""
    r = account_components(job_components(job), deltas, eps_grid)
    one = (slice(index, index + 1),)
    row = (slice(index, index + 1), slice(None))
    values: dict[str, tuple[tuple[int | slice, ...], np.ndarray]] = {
        k: (one, np.array([r[k]], dtype=dt)) for k, dt in _SCALARS.items()
    }
    values["method"] = (one, np.array([str(r["method"])], dtype=object))
    for k in (*_PER_DELTA, *_PER_EPS):
        values[k] = (row, np.asarray(r[k], dtype=float)[None, :])
    store.write_part(PARTS, (index,), values)


def sweep_dataset(
    jobs: list[Job], results: list[dict[str, Any]], deltas: list[float], grid: np.ndarray
) -> xr.Dataset:
    def col(key: str) -> np.ndarray:
        return np.array([r[key] for r in results])

    labels = {
        f: np.array([getattr(j, f) for j in jobs], dtype=object)
        for f in ("allocation", "universe", "region", "neighbours", "geolevel")
    }
    # an allocation file by its name and content digest, not its path
    names = {a: a if a == CUMULATIVE else allocation_label(a) for a in labels["allocation"]}
    labels["allocation"] = np.array([names[j.allocation] for j in jobs], dtype=object)
    job_labels = [names[j.allocation] + j.label[len(j.allocation) :] for j in jobs]
    return xr.Dataset(
        {
            "rho": (("job",), col("rho")),
            "n_queries": (("job",), col("n_queries").astype(np.int64)),
            "sigma2_min": (("job",), col("sigma2_min")),
            "sigma2_max": (("job",), col("sigma2_max")),
            "method": (("job",), np.array([r["method"] for r in results], dtype=object)),
            "eps_exact_lower": (("job", "delta"), col("eps_exact_lower")),
            "eps_exact_upper": (("job", "delta"), col("eps_exact_upper")),
            "eps_bureau": (("job", "delta"), col("eps_bureau")),
            "eps_cks": (("job", "delta"), col("eps_cks")),
            "delta_exact_upper": (("job", "eps_grid"), col("delta_exact_upper")),
            "delta_bureau": (("job", "eps_grid"), col("delta_bureau")),
        },
        coords={
            "job": np.array(job_labels, dtype=object),
            **{k: ("job", v) for k, v in labels.items()},
            "delta": np.array(deltas),
            "eps_grid": grid,
        },
        attrs={
            "description": "exact (certified bracket) vs Bureau and CKS epsilon per job",
            "bureau_conversion": "eps = rho + 2 sqrt(rho ln(1/delta))",
            "bureau_na": "NaN eps_bureau, eps_cks, delta_bureau: jobs of an allocation file with "
            "geometric or Laplace queries (pure eps-DP, not accounted in zCDP as the Bureau's "
            "noise is)",
        },
    )


@flow(name="dpaudit-accounting-sweep", validate_parameters=False)
def accounting_sweep_flow(
    store: ResultStore | str,
    allocations: list[str],
    neighbours: list[str],
    deltas: list[float],
    eps_grid_points: int = 200,
) -> dict[str, Any]:
    """Account every job on the task runner's cluster and write the ``accounting_sweep`` group."""
    jobs = plan_jobs(allocations, neighbours)
    rho_max = max(float(sum(c / (2 * s) for s, c in job_components(j))) for j in jobs)
    grid = np.linspace(0.0, 1.05 * float(bureau_epsilon(rho_max, min(deltas))), eps_grid_points)
    nj, nd, ng = len(jobs), len(deltas), len(grid)
    layout: dict[str, tuple[tuple[int, ...], tuple[int, ...], str]] = {
        k: ((nj,), (1,), dt) for k, dt in {**_SCALARS, "method": "str"}.items()
    }
    layout |= {k: ((nj, nd), (1, nd), "float64") for k in _PER_DELTA}
    layout |= {k: ((nj, ng), (1, ng), "float64") for k in _PER_EPS}
    chunks = [Chunk((i,), f"account {j.label}", (i, j, deltas, grid)) for i, j in enumerate(jobs)]

    def assemble(parts: dict[str, np.ndarray]) -> xr.Dataset:
        keys = (*_SCALARS, *_PER_DELTA, *_PER_EPS)
        results = [
            {"method": str(parts["method"][i]), **{k: parts[k][i] for k in keys}} for i in range(nj)
        ]
        return sweep_dataset(jobs, results, deltas, grid)

    run_id = sweep_run_id(allocations, neighbours, deltas, eps_grid_points)
    run = run_chunked(
        store, run_id, GROUP, PARTS, layout, (nj,), chunks, account_job, assemble, what="jobs"
    )
    return {"jobs": nj, "computed": run.computed, "resumed": run.resumed}
