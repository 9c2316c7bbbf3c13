"""The direct privacy-loss estimate as a flow: replicate chunks of D and D′ runs fanned out on Dask.

Seed 001 §2.3: run GDPC/RDPC/ADPC R times on D and R times on D′ (one person moved, added or
removed) and compare one unit's error frequencies. Each task computes one chunk of replicates
(``auditlib.epl.direct.direct_chunk``, keyed streams: the chunking and the workers do not change
the numbers) and returns two short arrays; the flow writes the Zarr group ``direct``:

- ``error(database, replicate)``: ``DP_unit − TC_unit(D)`` under D and D′;
- for each event family f ∈ {eq, ge}: ``log_ratio_f``, ``low_f``, ``high_f``, ``count_d_f``,
  ``count_d_prime_f`` over ``k_f`` (the kept events), attrs ``epl_f`` (max |log-ratio|, errs up)
  and ``epl_lower_f`` (a simultaneous lower bound on ε).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import xarray as xr
from prefect import flow, task

from auditlib.epl.direct import EVENTS, direct_chunk, direct_log_ratio
from flows.tasks import TASK_OPTS
from storage import store

GROUP = "direct"


@dataclass(frozen=True)
class DirectParams:
    """One direct experiment: seed 001's population, the algorithm, the neighbour, the cell."""

    people: int = 1_000_000
    levels: int = 3
    mean_per_location: float = 100.0
    population_seed: int = 1
    algorithm: str = "gdpc"
    epsilon: float = 0.1
    n_runs: int = 4
    change: str = "move"  # move | add | remove
    from_leaf: int = 0
    to_leaf: int = 1001
    level: int | None = None  # None: the leaves
    unit: int = 0
    replicates: int = 500
    chunk: int = 100
    seed: int = 2020
    min_events: int = 10
    confidence: float = 0.9
    bin_width: float | None = None  # None: 1/P for ADPC, else 1

    def resolved_level(self) -> int:
        return self.levels if self.level is None else int(self.level)

    def resolved_bin_width(self) -> float:
        if self.bin_width is not None:
            return float(self.bin_width)
        return 1.0 / self.n_runs if self.algorithm == "adpc" else 1.0


def neighbour_pair(p: DirectParams) -> Any:
    """The databases D and D′ of an experiment (the population is rebuilt from its seed)."""
    from auditlib.exceptions import InvalidParameterError
    from auditlib.geography.flaxman import generate_population
    from auditlib.simulate.neighbours import add_person, move_between_areas, remove_person

    pop = generate_population(p.people, p.levels, p.mean_per_location, seed=p.population_seed)
    if p.change == "move":
        return move_between_areas(pop, p.from_leaf, p.to_leaf)
    if p.change == "add":
        return add_person(pop, p.to_leaf)
    if p.change == "remove":
        first = np.flatnonzero(pop.leaf == p.from_leaf)
        if first.size == 0:
            raise InvalidParameterError(f"Invalid from_leaf: {p.from_leaf}; nobody lives there")
        return remove_person(pop, int(first[0]))
    raise InvalidParameterError(f"Invalid change: {p.change!r}; allowed: move, add, remove")


@task(name="direct-chunk", **TASK_OPTS)
def direct_chunk_task(params: dict[str, Any], start: int, stop: int) -> tuple[Any, Any]:
    p = DirectParams(**params)
    return direct_chunk(
        neighbour_pair(p),
        p.algorithm,  # type: ignore[arg-type]
        p.epsilon,
        level=p.resolved_level(),
        unit=p.unit,
        start=start,
        stop=stop,
        seed=p.seed,
        n_runs=p.n_runs,
    )


def direct_dataset(p: DirectParams, errors: np.ndarray) -> xr.Dataset:
    """The stored group: the errors and, per event family, the log-ratio curve and its band."""
    data: dict[str, Any] = {"error": (("database", "replicate"), errors)}
    coords: dict[str, Any] = {
        "database": np.array(["D", "D_prime"], dtype=object),
        "replicate": np.arange(errors.shape[1]),
    }
    attrs: dict[str, Any] = {k: v for k, v in asdict(p).items() if v is not None}
    attrs["bin_width"] = p.resolved_bin_width()
    attrs["level"] = p.resolved_level()
    for ev in EVENTS:
        est = direct_log_ratio(
            errors[0],
            errors[1],
            event=ev,
            min_events=p.min_events,
            confidence=p.confidence,
            bin_width=p.resolved_bin_width(),
        )
        dim = f"k_{ev}"
        coords[dim] = est.k
        data.update(
            {
                f"log_ratio_{ev}": ((dim,), est.log_ratio),
                f"low_{ev}": ((dim,), est.low),
                f"high_{ev}": ((dim,), est.high),
                f"count_d_{ev}": ((dim,), est.count_d),
                f"count_d_prime_{ev}": ((dim,), est.count_d_prime),
            }
        )
        attrs.update({f"epl_{ev}": est.epl, f"epl_lower_{ev}": est.epl_lower})
        attrs[f"status_{ev}"] = est.status
    attrs["estimate"] = (
        "log P_D(E_k)/P_D'(E_k) for E_k = {error in bin k} (eq) or {error >= k} (ge), kept where "
        "both samples hold >= min_events; low/high: pointwise Katz log interval; epl_*: max "
        "|log-ratio| (errs up); epl_lower_*: Bonferroni lower bound on epsilon"
    )
    return xr.Dataset(data, coords=coords, attrs=attrs)


@flow(name="dpaudit-direct", validate_parameters=False)
def direct_flow(url: str, params: DirectParams) -> dict[str, Any]:
    """Run the experiment into the (new) store at ``url``; return a small summary."""
    raw = asdict(params)
    futures = [
        direct_chunk_task.with_options(
            task_run_name=f"direct {params.algorithm} reps {s}-{min(s + params.chunk, params.replicates) - 1}"
        ).submit(raw, s, min(s + params.chunk, params.replicates))
        for s in range(0, params.replicates, params.chunk)
    ]
    errors = np.empty((2, params.replicates), dtype=np.float64)
    for s, f in zip(range(0, params.replicates, params.chunk), futures, strict=True):
        e_d, e_p = f.result()
        errors[0, s : s + len(e_d)] = e_d
        errors[1, s : s + len(e_p)] = e_p
    ds = direct_dataset(params, errors)
    store.write_group(url, GROUP, ds)
    return {
        "tasks": len(futures),
        "replicates": params.replicates,
        **{k: ds.attrs[k] for k in ("epl_eq", "epl_lower_eq", "epl_ge", "epl_lower_ge")},
    }
