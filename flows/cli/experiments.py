"""The experiment commands: ``sweep`` (the accounting of every allocation, on Dask) and
``mpl-coverage`` (MPL lower bounds on mechanisms with known ε, on Dask)."""

from __future__ import annotations

import math
import time
from typing import Annotated

import typer

from auditlib.exceptions import DPAuditError, InvalidParameterError
from flows.cli.errors import fail
from flows.cli.execute import (
    check_target_and_scheduler,
    execute_resumable,
    print_prefect_link,
    publish_artifacts,
)
from flows.cli.options import Neighbours, OverwriteOption, SchedulerOption
from flows.runtime import apply_prefect_defaults


def sweep(
    allocation: Annotated[
        list[str] | None, typer.Option("--allocation", "-a", help="Allocation(s); default: all.")
    ] = None,
    neighbours: Annotated[
        list[Neighbours] | None, typer.Option("--neighbours", "-n", help="Default: both.")
    ] = None,
    delta: Annotated[
        list[float] | None, typer.Option("--delta", "-d", help="δ value(s) in (0, 1).")
    ] = None,
    store_url: Annotated[
        str, typer.Option("--store", help="Output store.")
    ] = "results/accounting.zarr",
    points: Annotated[int, typer.Option("--points", help="ε grid points of the curves.")] = 200,
    scheduler: Annotated[
        str, typer.Option("--scheduler", help="Dask scheduler address; empty: local cluster.")
    ] = "",
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace the store.")] = False,
) -> None:
    """Account every allocation × universe × region × level × neighbour relation on Dask."""
    apply_prefect_defaults()
    from auditlib.allocations import list_allocations, load_allocation
    from flows.artifacts import experiment_artifacts
    from flows.sweep import accounting_sweep_flow, plan_jobs, sweep_run_id

    allocs = allocation or list_allocations()
    nbs = [n.value for n in neighbours] if neighbours else ["add_remove", "bounded"]
    deltas = sorted(set(delta or [1e-5, 1e-10, 1e-11]), reverse=True)
    try:
        for a in allocs:
            alloc = load_allocation(a)  # an allocation file: checked row by row (any mechanism)
            for nb in nbs:
                alloc.check_relation(nb)
        for d in deltas:
            if not (math.isfinite(d) and 1e-20 <= d < 1):
                raise InvalidParameterError(f"Invalid delta: {d!r}; must be in [1e-20, 1)")
        if not 10 <= points <= 5000:
            raise InvalidParameterError(f"Invalid --points: {points}; allowed 10..5000")
        cluster = check_target_and_scheduler(store_url, overwrite, scheduler)
    except DPAuditError as exc:
        fail(str(exc))
    run_id = sweep_run_id(allocs, nbs, deltas, points)
    t0 = time.perf_counter()
    summary, api_url, embedded = execute_resumable(
        accounting_sweep_flow,
        lambda staging: (staging, allocs, nbs, deltas, points),
        store_url,
        cluster,
        run_id,
        overwrite=overwrite,
        parts="jobs",
    )
    n = len(plan_jobs(allocs, nbs))
    typer.echo(f"sweep {run_id}: {n} jobs, {time.perf_counter() - t0:.1f} s")
    typer.echo(f"store:  {store_url} (group 'accounting_sweep')")
    publish_artifacts(
        api_url,
        embedded,
        summary["flow_run_id"],
        lambda: experiment_artifacts("sweep", run_id, store_url, "accounting_sweep"),
    )
    print_prefect_link(api_url, embedded, summary["flow_run_id"])


#: the names of auditlib.mpl.coverage.CATALOGUE, for --help without importing it (a test checks)
MPL_CATALOGUE_NAMES = (
    "laplace, laplace_broken, report_noisy_max, exponential, continuous_noisy_max, "
    "geometric_count, gdpc_count, adpc_count, census_dg_count, randomized_response, randomized_response_k4, "
    "randomized_response_broken, svt2, svt4, svt5, svt6"
)


def mpl_coverage(
    mechanism: Annotated[
        list[str] | None,
        typer.Option(
            "--mechanism",
            "-m",
            help=f"Catalogue mechanism(s), repeatable: {MPL_CATALOGUE_NAMES}. Default: laplace.",
        ),
    ] = None,
    epsilon: Annotated[
        list[float] | None,
        typer.Option("--epsilon", "-e", help="Claimed ε₀ (default 0.2 0.7 1.5)."),
    ] = None,
    repetitions: Annotated[int, typer.Option("--reps", help="Repetitions per cell.")] = 100,
    n: Annotated[int, typer.Option("--n", help="Draws per input, step 1.")] = 20_000,
    n_confidence: Annotated[
        int, typer.Option("--N", help="Fresh draws, confidence step.")
    ] = 50_000,
    alpha: Annotated[float, typer.Option("--alpha", help="1 − confidence level.")] = 0.05,
    seed: Annotated[int, typer.Option("--seed")] = 2022,
    store_url: Annotated[str, typer.Option("--store")] = "results/mpl.zarr",
    scheduler: SchedulerOption = "",
    overwrite: OverwriteOption = False,
) -> None:
    """MPL coverage experiments (seed 002 §V) on mechanisms with known ε, fanned out on Dask."""
    apply_prefect_defaults()
    from auditlib.mpl.coverage import CATALOGUE
    from flows.artifacts import experiment_artifacts
    from flows.mpl import GROUP, coverage_run_id, mpl_coverage_flow
    from storage import store

    mechs = mechanism or ["laplace"]
    eps = epsilon or [0.2, 0.7, 1.5]
    try:
        for m in mechs:
            if m not in CATALOGUE:
                raise InvalidParameterError(
                    f"Unknown mechanism: {m!r}; allowed: {', '.join(CATALOGUE)}"
                )
        for e in eps:
            if not (math.isfinite(e) and e > 0):
                raise InvalidParameterError(f"Invalid epsilon: {e!r}; must be > 0")
        given: tuple[tuple[str, list[str]], ...] = (
            ("--mechanism", mechs),
            ("--epsilon", [f"{e:g}" for e in eps]),
        )
        for what, values in given:
            dup = sorted({v for v in values if values.count(v) > 1})
            if dup:
                raise InvalidParameterError(
                    f"Invalid {what}: {', '.join(dup)} given twice; give each value once."
                )
        if not 0 < alpha < 1:
            raise InvalidParameterError(f"Invalid alpha: {alpha!r}; must be in (0, 1)")
        from auditlib.mpl.coverage import check_coverage_sizes

        check_coverage_sizes(repetitions, n, n_confidence)  # each in its range, bounded above
        cluster = check_target_and_scheduler(store_url, overwrite, scheduler)
    except DPAuditError as exc:
        fail(str(exc))
    chunk = 10
    run_id = coverage_run_id(mechs, eps, repetitions, n, n_confidence, alpha, seed, chunk)
    summary, api_url, embedded = execute_resumable(
        mpl_coverage_flow,
        lambda staging: (staging, mechs, eps, repetitions, n, n_confidence, alpha, seed, chunk),
        store_url,
        cluster,
        run_id,
        overwrite=overwrite,
        parts="chunks",
    )
    ds = store.open_group(store_url, GROUP)
    typer.echo(f"{'mechanism':<27} {'eps0':>6} {'eps*_C':>8} {'coverage':>9} {'LB > claim':>11}")
    for m in ds.mechanism.values:
        for e0 in ds.epsilon0.values:
            c = ds.sel(mechanism=m, epsilon0=e0)
            typer.echo(
                f"{m!s:<27} {e0:6.2f} {float(c.epsilon_c):8.4f} {float(c.coverage):9.3f} "
                f"{float(c.exceeds_claim):11.3f}"
            )
    typer.echo(f"store:  {store_url} (group {GROUP!r})")
    publish_artifacts(
        api_url,
        embedded,
        summary["flow_run_id"],
        lambda: experiment_artifacts("mpl-coverage", run_id, store_url, GROUP),
    )
    print_prefect_link(api_url, embedded, summary["flow_run_id"])
