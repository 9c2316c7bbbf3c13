"""``dpaudit direct``: seed 001's direct privacy-loss estimate of one cell, on Dask."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict
from typing import Annotated

import typer

from auditlib.exceptions import DPAuditError, InvalidParameterError
from flows.cli_common import OverwriteOption, SchedulerOption, app, fail
from flows.runtime import apply_prefect_defaults


def check_params(p: object) -> None:
    """Bad experiment settings raise :class:`InvalidParameterError` naming the value and the fix."""
    from auditlib.geography.flaxman import children_per_unit
    from auditlib.simulate.hierarchical import ALGORITHMS
    from flows.direct import DirectParams

    assert isinstance(p, DirectParams)
    if p.algorithm not in ALGORITHMS:
        raise InvalidParameterError(
            f"Invalid --algorithm: {p.algorithm!r}; allowed: {', '.join(ALGORITHMS)}"
        )
    if not (math.isfinite(p.epsilon) and p.epsilon > 0):
        raise InvalidParameterError(f"Invalid --epsilon: {p.epsilon!r}; pass a number > 0")
    if p.change not in ("move", "add", "remove"):
        raise InvalidParameterError(f"Invalid --change: {p.change!r}; allowed: move, add, remove")
    if p.replicates < 1 or p.chunk < 1:
        raise InvalidParameterError(
            f"Invalid sizes: --reps {p.replicates}, --chunk {p.chunk}; both must be >= 1"
        )
    if p.min_events < 1 or not 0 < p.confidence < 1:
        raise InvalidParameterError(
            f"Invalid --min-events {p.min_events} or --confidence {p.confidence}; need >= 1 and "
            "a number in (0, 1)"
        )
    if p.bin_width is not None and not (math.isfinite(p.bin_width) and p.bin_width > 0):
        raise InvalidParameterError(f"Invalid --bin-width: {p.bin_width!r}; pass a number > 0")
    c = children_per_unit(p.people, p.levels, p.mean_per_location)
    leaves = c**p.levels
    for name, leaf in (("--from-leaf", p.from_leaf), ("--to-leaf", p.to_leaf)):
        if not 0 <= leaf < leaves:
            raise InvalidParameterError(
                f"Invalid {name}: {leaf}; the tree has {leaves} leaves (0..{leaves - 1})"
            )
    level = p.resolved_level()
    if not 0 <= level <= p.levels:
        raise InvalidParameterError(f"Invalid --level: {level}; allowed 0..{p.levels}")
    if p.algorithm != "rdpc" and level != p.levels:
        raise InvalidParameterError(
            f"Invalid --level: {level}; {p.algorithm} releases only the leaves ({p.levels})"
        )
    if not 0 <= p.unit < c**level:
        raise InvalidParameterError(
            f"Invalid --unit: {p.unit}; level {level} has {c**level} units (0..{c**level - 1})"
        )


@app.command(name="direct")
def direct(
    algorithm: Annotated[
        str, typer.Option("--algorithm", "-a", help="gdpc | rdpc | adpc")
    ] = "gdpc",
    epsilon: Annotated[float, typer.Option("--epsilon", "-e", help="Total budget ε.")] = 0.1,
    n_runs: Annotated[int, typer.Option("--n-runs", help="P of ADPC.")] = 4,
    people: Annotated[int, typer.Option("--people", help="N (seed 001: 10⁶).")] = 1_000_000,
    levels: Annotated[int, typer.Option("--levels", help="J (seed 001: 3).")] = 3,
    mean: Annotated[float, typer.Option("--mean", help="μ people per location.")] = 100.0,
    population_seed: Annotated[int, typer.Option("--population-seed")] = 1,
    change: Annotated[str, typer.Option("--change", help="move | add | remove")] = "move",
    from_leaf: Annotated[int, typer.Option("--from-leaf")] = 0,
    to_leaf: Annotated[int, typer.Option("--to-leaf")] = 1001,
    level: Annotated[
        int | None, typer.Option("--level", help="Level of the cell; default: the leaves.")
    ] = None,
    unit: Annotated[int, typer.Option("--unit", help="Unit of the cell at that level.")] = 0,
    replicates: Annotated[int, typer.Option("--reps", help="Runs on D and on D′ each.")] = 500,
    chunk: Annotated[int, typer.Option("--chunk", help="Replicates per task.")] = 100,
    seed: Annotated[int, typer.Option("--seed")] = 2020,
    min_events: Annotated[
        int, typer.Option("--min-events", help="Keep events seen >= k times in both samples.")
    ] = 10,
    confidence: Annotated[float, typer.Option("--confidence")] = 0.9,
    bin_width: Annotated[
        float | None, typer.Option("--bin-width", help="Error bin; default 1 (ADPC: 1/P).")
    ] = None,
    store_url: Annotated[str, typer.Option("--store")] = "results/direct.zarr",
    scheduler: SchedulerOption = "",
    overwrite: OverwriteOption = False,
) -> None:
    """Direct estimate (seed 001): one cell's error under D and D′ over many runs, on Dask."""
    apply_prefect_defaults()
    from flows.cli import _check_target_and_scheduler, _execute, _print_prefect_link
    from flows.direct import GROUP, DirectParams, direct_flow
    from storage import store

    p = DirectParams(
        people=people,
        levels=levels,
        mean_per_location=mean,
        population_seed=population_seed,
        algorithm=algorithm,
        epsilon=epsilon,
        n_runs=n_runs,
        change=change,
        from_leaf=from_leaf,
        to_leaf=to_leaf,
        level=level,
        unit=unit,
        replicates=replicates,
        chunk=chunk,
        seed=seed,
        min_events=min_events,
        confidence=confidence,
        bin_width=bin_width,
    )
    try:
        check_params(p)
        cluster = _check_target_and_scheduler(store_url, overwrite, scheduler)
    except DPAuditError as exc:
        fail(str(exc))
    run_id = hashlib.sha256(json.dumps(asdict(p)).encode()).hexdigest()[:16]
    summary, api_url, embedded = _execute(
        direct_flow, lambda staging: (staging, p), store_url, cluster, run_id
    )
    ds = store.open_group(store_url, GROUP)
    typer.echo(
        f"{'events':<8} {'kept':>5} {'max |log-ratio|':>16} {'lower bound':>12}  (ε = {epsilon:g})"
    )
    for ev in ("eq", "ge"):
        typer.echo(
            f"{ev:<8} {ds.sizes[f'k_{ev}']:>5} {ds.attrs[f'epl_{ev}']:>16.4f} "
            f"{ds.attrs[f'epl_lower_{ev}']:>12.4f}"
        )
    typer.echo(f"store:  {store_url} (group {GROUP!r})")
    _print_prefect_link(api_url, embedded, summary["flow_run_id"])
