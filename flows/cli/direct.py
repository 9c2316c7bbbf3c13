"""``dpaudit direct``: the direct privacy-loss estimate of one cell, on Dask — Flaxman's population
(``--people``, ``--algorithm``, …) or the population and release of an audit spec (``--spec``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any

import typer

from auditlib.exceptions import DPAuditError, InvalidParameterError
from flows.cli.checks import load_spec
from flows.cli.errors import fail
from flows.cli.execute import (
    check_target_and_scheduler,
    execute_resumable,
    print_prefect_link,
    publish_artifacts,
)
from flows.cli.options import OverwriteOption, SchedulerOption
from flows.runtime.cluster import apply_prefect_defaults

if TYPE_CHECKING:
    from storage.result_store import ResultStore


def check_params(p: object) -> None:
    """Bad experiment settings raise :class:`InvalidParameterError` naming the value and the fix."""
    from auditlib.geography.flaxman import check_population_size, children_per_unit
    from auditlib.simulate.direct import MAX_REPLICATES
    from auditlib.simulate.hierarchical import ALGORITHMS
    from flows.experiments.direct_runs import DirectParams

    assert isinstance(p, DirectParams)
    if p.algorithm not in ALGORITHMS:
        raise InvalidParameterError(
            f"Invalid --algorithm: {p.algorithm!r}; allowed: {', '.join(ALGORITHMS)}"
        )
    if not (math.isfinite(p.epsilon) and p.epsilon > 0):
        raise InvalidParameterError(f"Invalid --epsilon: {p.epsilon!r}; pass a number > 0")
    if p.change not in ("move", "add", "remove"):
        raise InvalidParameterError(f"Invalid --change: {p.change!r}; allowed: move, add, remove")
    if not (1 <= p.replicates <= MAX_REPLICATES and 1 <= p.chunk <= MAX_REPLICATES):
        raise InvalidParameterError(
            f"Invalid sizes: --reps {p.replicates}, --chunk {p.chunk}; both must be in "
            f"1..{MAX_REPLICATES} (MAX_REPLICATES)"
        )
    check_population_size(p.people, p.levels, p.mean_per_location)  # D and D′ must fit
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


def flaxman_level(text: str) -> int:
    """The level index ``j`` of ``--level`` for Flaxman's tree: ``Lj`` (its name in the stores and
    the report) or ``j``; anything else names the fix."""
    digits = text[1:] if text[:1] in ("L", "l") else text
    if not digits.isdigit():
        raise InvalidParameterError(
            f"Invalid --level: {text!r}; Flaxman's tree has levels L0..LJ (0 is the root; "
            "J = --levels); a geolevel name needs --spec"
        )
    return int(digits)


#: options of Flaxman's population, refused with --spec (name, parameter, default)
SEED001_ONLY = (
    ("--algorithm", "algorithm", "gdpc"),
    ("--epsilon", "epsilon", 0.1),
    ("--n-runs", "n_runs", 4),
    ("--people", "people", 1_000_000),
    ("--levels", "levels", 3),
    ("--mean", "mean", 100.0),
    ("--population-seed", "population_seed", 1),
    ("--from-leaf", "from_leaf", 0),
    ("--to-leaf", "to_leaf", 1001),
)
#: options of a spec experiment, refused without --spec (name, parameter, default)
SPEC_ONLY = (
    ("--state", "state", ""),
    ("--from-block", "from_block", None),
    ("--from-cell", "from_cell", "0"),
    ("--to-block", "to_block", None),
    ("--to-cell", "to_cell", ""),
    ("--query", "query", "total"),
    ("--cell", "cell", "0"),
    ("--stream-chunk", "stream_chunk", None),
)


def _refuse_mixed(values: dict[str, object], spec: bool) -> None:
    """Options of the other kind of experiment, given explicitly, name the fix."""
    for name, key, default in SEED001_ONLY if spec else SPEC_ONLY:
        if values[key] != default:
            fix = (
                "with --spec the population and release come from the spec; drop it"
                if spec
                else "it needs --spec FILE.toml (an audit spec's population and release)"
            )
            raise InvalidParameterError(f"Invalid {name} {values[key]!r}: {fix}")


def spec_params(spec_path: str, values: dict[str, object]) -> object:
    """The :class:`~flows.experiments.direct_runs.SpecDirectParams` of ``--spec`` and the command's options."""
    from flows.experiments.direct_runs import DEFAULT_STREAM_CHUNK, SpecDirectParams

    spec = load_spec(spec_path)  # a table's relative path resolves against the spec's directory
    stream = values["stream_chunk"] or DEFAULT_STREAM_CHUNK
    return SpecDirectParams(
        spec=spec.to_toml(),
        change=str(values["change"]),
        from_block=values["from_block"],  # type: ignore[arg-type]
        from_cell=str(values["from_cell"]),
        to_block=values["to_block"],  # type: ignore[arg-type]
        to_cell=str(values["to_cell"]),
        state=str(values["state"]),
        geolevel=str(values["level"] or ""),
        unit=int(values["unit"]),  # type: ignore[call-overload]
        query=str(values["query"]),
        cell=str(values["cell"]),
        replicates=int(values["replicates"]),  # type: ignore[call-overload]
        chunk=int(values["chunk"] or stream),  # type: ignore[call-overload]
        stream_chunk=int(stream),  # type: ignore[call-overload]
        seed=int(values["seed"]),  # type: ignore[call-overload]
        min_events=int(values["min_events"]),  # type: ignore[call-overload]
        confidence=float(values["confidence"]),  # type: ignore[arg-type]
        bin_width=values["bin_width"],  # type: ignore[arg-type]
    )


def direct(
    algorithm: Annotated[
        str, typer.Option("--algorithm", "-a", help="gdpc | rdpc | adpc")
    ] = "gdpc",
    epsilon: Annotated[float, typer.Option("--epsilon", "-e", help="Total budget ε.")] = 0.1,
    n_runs: Annotated[int, typer.Option("--n-runs", help="P of ADPC.")] = 4,
    people: Annotated[int, typer.Option("--people", help="N (Flaxman 2019: 10⁶).")] = 1_000_000,
    levels: Annotated[int, typer.Option("--levels", help="J (Flaxman 2019: 3).")] = 3,
    mean: Annotated[float, typer.Option("--mean", help="μ people per location.")] = 100.0,
    population_seed: Annotated[
        int, typer.Option("--population-seed", help="Seed of the synthetic population.")
    ] = 1,
    change: Annotated[str, typer.Option("--change", help="move | add | remove")] = "move",
    from_leaf: Annotated[
        int, typer.Option("--from-leaf", help="Leaf losing the person (move, remove).")
    ] = 0,
    to_leaf: Annotated[
        int, typer.Option("--to-leaf", help="Leaf gaining the person (move, add).")
    ] = 1001,
    level: Annotated[
        str | None,
        typer.Option(
            "--level",
            help="Level of the cell: with --spec a geolevel (default: the blocks), else L0..LJ "
            "(default: the leaves).",
        ),
    ] = None,
    unit: Annotated[int, typer.Option("--unit", help="Unit of the cell at that level.")] = 0,
    replicates: Annotated[int, typer.Option("--reps", help="Runs on D and on D′ each.")] = 500,
    chunk: Annotated[
        int | None,
        typer.Option("--chunk", help="Replicates per task (default 100; --spec: --stream-chunk)."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the releases' noise.")] = 2020,
    min_events: Annotated[
        int, typer.Option("--min-events", help="Keep events seen >= k times in both samples.")
    ] = 10,
    confidence: Annotated[
        float, typer.Option("--confidence", help="Confidence of the interval on the loss.")
    ] = 0.9,
    bin_width: Annotated[
        float | None, typer.Option("--bin-width", help="Error bin; default 1 (ADPC: 1/P).")
    ] = None,
    spec: Annotated[
        str,
        typer.Option(
            "--spec",
            help="Audit spec (TOML): its population and release instead of Flaxman's.",
        ),
    ] = "",
    state: Annotated[
        str, typer.Option("--state", help="--spec: the state (ST01, …); default: the first.")
    ] = "",
    from_block: Annotated[
        int | None,
        typer.Option("--from-block", help="--spec: block losing the person (move, remove)."),
    ] = None,
    from_cell: Annotated[
        str, typer.Option("--from-cell", help="--spec: its detailed cell (index or label).")
    ] = "0",
    to_block: Annotated[
        int | None, typer.Option("--to-block", help="--spec: block gaining the person (move, add).")
    ] = None,
    to_cell: Annotated[
        str,
        typer.Option("--to-cell", help="--spec: its detailed cell; default: --from-cell (add: 0)."),
    ] = "",
    query: Annotated[str, typer.Option("--query", help="--spec: query of the cell.")] = "total",
    cell: Annotated[
        str, typer.Option("--cell", help="--spec: cell of the query (index or label).")
    ] = "0",
    stream_chunk: Annotated[
        int | None,
        typer.Option("--stream-chunk", help="--spec: replicates per keyed stream (default 500)."),
    ] = None,
    store_url: Annotated[
        str, typer.Option("--store", metavar="STORE", help="Result store (path or s3:// URL).")
    ] = "results/direct.zarr",
    scheduler: SchedulerOption = "",
    overwrite: OverwriteOption = False,
) -> None:
    """Direct estimate: one cell's error under D and D′ over many runs, on Dask — Flaxman's
    population, or an audit spec's population and release (--spec) with one person moved, added
    or removed."""
    values = dict(locals())  # the options, before anything else is bound
    apply_prefect_defaults()
    from flows.experiments.direct_runs import DirectParams, check_spec_params
    from storage.result_store import ResultStore

    if spec:
        try:
            _refuse_mixed(values, spec=True)
            sp = spec_params(spec, values)
            check_spec_params(sp)  # type: ignore[arg-type]
            store = ResultStore.at(store_url)
            cluster = check_target_and_scheduler(store, overwrite, scheduler)
        except DPAuditError as exc:
            fail(str(exc))
        _run(sp, store, cluster, overwrite)
        return
    try:
        _refuse_mixed(values, spec=False)
        j = None if level is None else flaxman_level(level)
    except DPAuditError as exc:
        fail(str(exc))
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
        level=j,
        unit=unit,
        replicates=replicates,
        chunk=100 if chunk is None else chunk,
        seed=seed,
        min_events=min_events,
        confidence=confidence,
        bin_width=bin_width,
    )
    try:
        check_params(p)
        store = ResultStore.at(store_url)
        cluster = check_target_and_scheduler(store, overwrite, scheduler)
    except DPAuditError as exc:
        fail(str(exc))
    _run(p, store, cluster, overwrite)


def _run(p: object, store: ResultStore, cluster: object, overwrite: bool = False) -> None:
    """Run an experiment into its ``store`` and print the estimate."""
    from flows.audit.artifacts import experiment_artifacts
    from flows.experiments.direct_loss import GROUP, direct_flow, direct_run_id

    run_id = direct_run_id(p)  # type: ignore[arg-type]
    summary, api_url, embedded = execute_resumable(
        direct_flow,
        lambda staging: (staging, p),
        store,
        cluster,
        run_id,
        overwrite=overwrite,
        parts="chunks",
    )
    ds = store.open_group(GROUP)
    if ds.attrs.get("population") == "spec":
        typer.echo(
            f"{ds.attrs['release']} of {ds.attrs['state']}/{ds.attrs['geolevel']} unit "
            f"{ds.attrs['unit']} {ds.attrs['query']}[{ds.attrs['cell_index']}]: count "
            f"{ds.attrs['truth_d']} in D, {ds.attrs['truth_d_prime']} in D′"
        )
    for line in direct_table(ds):
        typer.echo(line)
    typer.echo(f"store:  {store.shown} (group {GROUP!r})")
    publish_artifacts(
        api_url,
        embedded,
        summary["flow_run_id"],
        lambda: experiment_artifacts("direct", run_id, store, GROUP),
    )
    print_prefect_link(api_url, embedded, summary["flow_run_id"])


def direct_table(ds: Any) -> list[str]:
    """Per event kind of a ``direct`` group: events kept, max |log-ratio| and the lower bound on
    ε (at or below 0: vacuous, shown as "0 (vacuous)" with a note; no event kept: "—"), the
    known ε in the header."""
    from flows.report.mpl_bound import NOTE, VACUOUS, vacuous

    eps = ds.attrs.get("epsilon")
    known = f"  (ε = {eps:g})" if eps is not None else ""
    lines = [f"{'events':<8} {'kept':>5} {'max |log-ratio|':>16} {'lower bound':>12}{known}"]
    any_vacuous = False
    for ev in ("eq", "ge"):
        lb, epl = ds.attrs[f"epl_lower_{ev}"], ds.attrs[f"epl_{ev}"]
        any_vacuous |= vacuous(lb)
        shown = VACUOUS if vacuous(lb) else _cell(lb)
        lines.append(f"{ev:<8} {ds.sizes[f'k_{ev}']:>5} {_cell(epl):>16} {shown:>12}")
    if any_vacuous:
        lines.append(NOTE)
    return lines


def _cell(x: Any) -> str:
    """A number of the direct table to 4 decimals; "—" when missing (no event kept)."""
    return f"{float(x):.4f}" if x is not None and math.isfinite(float(x)) else "—"
