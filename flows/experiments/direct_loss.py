"""The direct privacy-loss estimate as a flow: replicate chunks of D and D′ runs fanned out on Dask.

Flaxman 2019 §2.3: run a release R times on D and R times on D′ (one person moved, added or removed)
and compare one unit's error frequencies. Two kinds of experiment:

- :class:`DirectParams` — Flaxman's person-level population and GDPC/RDPC/ADPC
  (``auditlib.epl.direct.direct_chunk``);
- :class:`SpecDirectParams` — the population and release of an audit spec (synthetic or spine
  states, a table; allocation, TopDown, GDPC/RDPC/ADPC, SA3/SA4) with D′ from D by a change of one
  (block, cell) (:mod:`auditlib.simulate.neighbours_hist`); D is the very population the audit of
  that spec simulates (``flows.audit.blocks.state_population``), and the released values come from
  ``auditlib.simulate.direct.release_range``.

Each task computes one chunk of replicates (keyed streams: the chunking and the workers do not
change the numbers) and returns two short arrays; the flow writes the Zarr group ``direct``:

- ``error(database, replicate)``: ``DP_unit − TC_unit(D)`` under D and D′;
- for each event family f ∈ {eq, ge}: ``log_ratio_f``, ``low_f``, ``high_f``, ``count_d_f``,
  ``count_d_prime_f`` over ``k_f`` (the kept events), attrs ``epl_f`` (max |log-ratio|, errs up)
  and ``epl_lower_f`` (a simultaneous lower bound on ε).
"""

from __future__ import annotations

import tomllib
from contextlib import nullcontext
from dataclasses import asdict
from typing import Any

import numpy as np
import xarray as xr
from prefect import flow, task

from auditlib.epl.direct import EVENTS, direct_chunk, direct_log_ratio
from flows.audit import spine_share
from flows.audit.tasks import TASK_OPTS
from flows.experiments.chunked import Chunk, repetition_chunks, run_chunked, run_id_of
from flows.experiments.direct_runs import (
    DirectParams,
    SpecDirectParams,
    neighbour_pair,
    spec_attrs,
    spec_experiment_on,
    spine_plan,
)
from flows.spec.digests import content_addressed, path_free
from flows.spec.toml_writer import dump_toml
from storage.result_store import ResultStore

GROUP = "direct"


@task(name="direct-spec-chunk", **TASK_OPTS)
def direct_spec_chunk_task(
    params: dict[str, Any], start: int, stop: int, plan: Any = None
) -> tuple[Any, Any]:
    """Errors ``DP − count(D)`` under D and D′ of replicates ``start..stop−1``; ``plan``: the
    flow's plan of a spine population (its spine shared, read here instead of generated)."""
    from auditlib.simulate.direct import release_range

    p = SpecDirectParams(**params)
    e = spec_experiment_on(p, plan)
    d, dp = release_range(
        e.pair,
        e.release,
        level=e.level,
        unit=e.unit,
        query=e.query,
        cell=e.cell,
        start=start,
        stop=stop,
        replicates=p.replicates,
        seed=p.seed,
        chunk=p.stream_chunk,
    )
    truth = e.truth()[0]
    return d - truth, dp - truth


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


def direct_dataset(p: DirectParams | SpecDirectParams, errors: np.ndarray) -> xr.Dataset:
    """The stored group: the errors and, per event family, the log-ratio curve and its band."""
    data: dict[str, Any] = {"error": (("database", "replicate"), errors)}
    coords: dict[str, Any] = {
        "database": np.array(["D", "D_prime"], dtype=object),
        "replicate": np.arange(errors.shape[1]),
    }
    attrs: dict[str, Any] = {k: v for k, v in asdict(p).items() if v is not None}
    attrs["bin_width"] = p.resolved_bin_width()
    if isinstance(p, SpecDirectParams):
        attrs.update(spec_attrs(p))
        attrs["spec"] = dump_toml(path_free(tomllib.loads(p.spec)))  # no allocation file's path
    else:
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
        "|log-ratio| (errs up); epl_lower_*: Bonferroni lower bound on epsilon, stored as "
        "estimated (max over k of |log-ratio|'s lower end, clipped at 0): a bound at or below 0 "
        "is vacuous (no kept event tells D from D'), shown as '0 (vacuous)'; NaN: no event kept"
    )
    return xr.Dataset(data, coords=coords, attrs=attrs)


#: the per-chunk errors of an unfinished run (staging only; assembled into GROUP, then removed)
PARTS = "direct_parts"


def direct_run_id(params: DirectParams | SpecDirectParams) -> str:
    """The run id of what determines the numbers and the chunking: the parameters, with a spec's
    ``output`` and ``cluster`` sections left out (where and on what it runs changes nothing) and the
    files it names counted by their content, not their paths."""
    raw = asdict(params)
    if isinstance(params, SpecDirectParams):
        spec = tomllib.loads(params.spec)
        raw["spec"] = {k: v for k, v in spec.items() if k not in ("output", "cluster")}
        content_addressed(raw["spec"])  # allocation files and tables: their content counts
    raw["kind"] = type(params).__name__
    return run_id_of(raw)


@task(name="direct-part", **TASK_OPTS)
def direct_part_task(
    store: ResultStore, index: int, params: dict[str, Any], start: int, stop: int, plan: Any = None
) -> int:
    """Run replicates ``start..stop−1`` of an experiment (``params`` with ``spec``: on an audit
    spec; ``plan``: its spine population's plan, the spine shared by the flow) and write their
    errors (D, D′) as chunk ``index`` of the parts group, marker last."""
    if "spec" in params:
        e_d, e_p = direct_spec_chunk_task.fn(params, start, stop, plan)
    else:
        e_d, e_p = direct_chunk_task.fn(params, start, stop)
    values = np.stack([np.asarray(e_d, dtype=float), np.asarray(e_p, dtype=float)])
    store.write_part(PARTS, (index,), {"error": ((slice(None), slice(start, stop)), values)})
    return stop - start


@flow(name="dpaudit-direct", validate_parameters=False)
def direct_flow(
    store: ResultStore | str, params: DirectParams | SpecDirectParams
) -> dict[str, Any]:
    """Run the experiment into ``store``; return a small summary.

    Resumable: each chunk's errors and done-marker go to the ``direct_parts`` group as the chunk
    finishes; a re-run on the same store computes only the chunks not marked done, then assembles
    the ``direct`` group and removes the parts.

    A spine population's spine is generated once, here, and shared with the workers of the flow's
    Dask cluster (:mod:`flows.audit.spine_share`), as the audit flow does."""
    store = ResultStore.of(store)
    raw = asdict(params)
    plan = spine_plan(params) if isinstance(params, SpecDirectParams) else None
    if isinstance(params, SpecDirectParams):
        what = type(spec_experiment_on(params, plan).release).__name__
    else:
        what = params.algorithm
    with spine_share.shared(plan) if plan is not None else nullcontext(None) as shared_plan:
        return _run(store, params, raw, what, shared_plan)


def _run(
    store: ResultStore,
    params: DirectParams | SpecDirectParams,
    raw: dict[str, Any],
    what: str,
    plan: Any,
) -> dict[str, Any]:
    reps, chunk = params.replicates, params.chunk
    ranges = repetition_chunks(reps, chunk)
    chunks = [
        Chunk((i,), f"direct {what} reps {s}-{e - 1}", (i, raw, s, e, plan))
        for i, (s, e) in enumerate(ranges)
    ]
    run = run_chunked(
        store,
        direct_run_id(params),
        GROUP,
        PARTS,
        {"error": ((2, reps), (2, chunk), "float64")},
        (len(ranges),),
        chunks,
        direct_part_task,
        lambda parts: direct_dataset(params, parts["error"]),
    )
    attrs = store.group_attrs(GROUP) if run.dataset is None else run.dataset.attrs
    return {
        **run.counts(),
        "replicates": reps,
        **{k: attrs[k] for k in ("epl_eq", "epl_lower_eq", "epl_ge", "epl_lower_ge")},
    }
