"""The direct estimate's experiments: what is run on D and on D′, and how D′ differs.

:class:`DirectParams` — Flaxman's person-level population and GDPC/RDPC/ADPC, one person moved,
added or removed; :class:`SpecDirectParams` — an audit spec's population and release with D′ from D
by a change of one (block, cell), resolved (and checked) into a :class:`SpecExperiment`. The flow
that runs them is ``flows.experiments.direct_loss``."""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class DirectParams:
    """One direct experiment: Flaxman's population, the algorithm, the neighbour, the cell."""

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


#: the changes of one person (``--change``)
CHANGES = ("move", "add", "remove")


#: replicates per keyed stream of a spec experiment (part of the numbers, unlike the task chunk)
DEFAULT_STREAM_CHUNK = 500


@dataclass(frozen=True)
class SpecDirectParams:
    """One direct experiment on an audit spec (its population and release sections).

    The change: ``remove`` one person of (``from_block``, ``from_cell``), ``add`` one to
    (``to_block``, ``to_cell``), or ``move`` one from the first to the second (``to_cell`` empty:
    the same cell). Blocks are indices within the state (``state``, a label of the spec's states;
    empty: the first), or within the table; cells are detailed-cell indices or labels. The released
    cell: ``cell`` (index or label) of ``query`` of ``unit`` at ``geolevel`` (empty: the blocks).
    ``stream_chunk`` replicates are drawn per keyed stream; ``chunk`` replicates run per task."""

    spec: str  # the audit spec, TOML
    change: str = "move"
    from_block: int | None = None
    from_cell: str = "0"
    to_block: int | None = None
    to_cell: str = ""
    state: str = ""
    geolevel: str = ""
    unit: int = 0
    query: str = "total"
    cell: str = "0"
    replicates: int = 2_000
    chunk: int = 500
    stream_chunk: int = DEFAULT_STREAM_CHUNK
    seed: int = 2020
    min_events: int = 10
    confidence: float = 0.9
    bin_width: float | None = None  # None: 1/P for ADPC, else 1

    def resolved_bin_width(self) -> float:
        if self.bin_width is not None:
            return float(self.bin_width)
        r = spec_experiment(self).release
        n_runs = getattr(r, "n_runs", 1)
        return 1.0 / n_runs if getattr(r, "algorithm", "") == "adpc" else 1.0


@dataclass(frozen=True)
class SpecExperiment:
    """What a :class:`SpecDirectParams` resolves to: (D, D′), the release, the released cell."""

    pair: Any  # HistogramPair
    release: Any  # auditlib.simulate.direct.Release
    state: str
    level: int
    unit: int
    query: str
    cell: int

    @property
    def geolevel(self) -> str:
        return str(self.pair.d.levels[self.level])

    def truth(self) -> tuple[int, int]:
        """The released cell's count in D and in D′."""
        d, dp = self.pair.d, self.pair.d_prime
        q = (self.level, self.query)
        return (
            int(d.query_counts(*q)[self.unit, self.cell]),
            int(dp.query_counts(*q)[self.unit, self.cell]),
        )


def _cell_ref(text: str) -> int | str:
    """A cell given on the command line: an index (``"3"``) or a label (``"18plus/hispanic/white"``)."""
    t = str(text).strip()
    return int(t) if t.isdigit() else t


def _topdown_spec(spec: Any) -> Any:
    """The spec with ``release.kind = "topdown"``: its plan holds the measurements of every level
    and the population TopDown runs on (an allocation release measures the same)."""
    if spec.release.kind == "topdown":
        return spec
    release = spec.release.model_copy(update={"kind": "topdown"})
    return spec.model_copy(update={"release": release})


def spine_plan(p: SpecDirectParams) -> Any:
    """The plan of an experiment on the US spine (``population.kind = "spine"``), made where it is
    called (generating the spine there): the flow makes it once and shares its spine with the
    workers (:mod:`flows.audit.spine_share`), which then read it (:func:`spec_experiment_on`); ``None``
    for any other population."""
    from flows.spec import parse_spec
    from flows.spec.plan import make_plan

    spec = parse_spec(tomllib.loads(p.spec), "--spec")
    if spec.population.kind != "spine":
        return None
    return make_plan(_topdown_spec(spec))


def _spec_database(spec: Any, state: str, plan: Any = None) -> tuple[Any, Any, str]:
    """(D, the release, the state label) of an audit spec's population and release sections;
    ``plan``: the spec's TopDown plan if made already (its spine shared by the flow)."""
    from auditlib.exceptions import InvalidParameterError
    from auditlib.geography import NATIONAL
    from auditlib.geography.schema import schema
    from auditlib.simulate.direct import TopDown
    from auditlib.simulate.neighbours_hist import HistogramDatabase
    from flows.audit.blocks import run_levels, state_population
    from flows.spec.plan import make_plan
    from flows.spec.sources import load_table

    kind = spec.population.kind
    if kind == "flaxman":
        raise InvalidParameterError(
            "Invalid --spec: population.kind = 'flaxman' is Flaxman's person-level population; "
            "drop --spec and give --people, --levels, --mean and --algorithm"
        )
    if kind == "table" and spec.release.kind != "topdown":
        if state:
            raise InvalidParameterError(
                f"Invalid --state {state!r}: a table population is one database (its rows); "
                "drop --state"
            )
        plan = make_plan(spec)
        t = plan.table
        assert t is not None
        db = HistogramDatabase.from_table(load_table(t.path, t.counts, t.levels, t.unit))
        return db, plan.strategy.direct_release(plan), "all"
    if plan is None:  # an allocation release: the allocation's measurements of the same population
        plan = make_plan(_topdown_spec(spec))
    states = [s for s in plan.states if s != NATIONAL]
    label = state or states[0]
    if label not in states:
        where = " (or widen population.spine_states)" if kind == "spine" else ""
        raise InvalidParameterError(
            f"Unknown --state {label!r}; the spec's states are {', '.join(states[:6])}"
            f"{', …' if len(states) > 6 else ''}{where}; pass one of them"
        )
    key = next(b.state_key for b in plan.blocks if plan.states[b.state] == label)
    td = plan.topdown
    assert td is not None
    check_dense(spec, plan, key, label)
    hierarchy, hist = state_population(plan, key)
    db = HistogramDatabase(schema(td.schema), hierarchy.levels, hierarchy.parents, hist, 1)
    measured = [td.measured[plan.geolevels[gi]] for gi in run_levels(plan)]
    if spec.release.kind == "topdown":
        return db, TopDown.of(measured, td.tol), label
    return db, _AllocationOf(tuple(tuple(m) for m in measured), spec.simulation.postprocess), label


#: Most memory the dense histograms of one direct experiment may take (D and D′, their blocks and
#: every level above, int64): 2 GiB. A production schema's cells times a state's units pass it
#: quickly (the DHC's 1,227,744 cells: 9.4 MB a unit).
MAX_DENSE_BYTES = 2 * 2**30


def _state_units(plan: Any, key: int) -> int:
    """Units of every level (blocks included) of state ``key`` of a TopDown plan."""
    return int(plan.strategy.state_units(plan, key))


def check_dense(spec: Any, plan: Any, key: int, label: str) -> None:
    """Refuse, before any histogram is drawn, a spec the direct estimate cannot hold or run: its
    databases are dense block histograms (``HistogramDatabase``), at most :data:`MAX_DENSE_BYTES`;
    its TopDown solves dense query matrices, which the DHC's schema has none of (the audit's
    sparse TopDown runs ``dpaudit run``)."""
    from auditlib.exceptions import InvalidParameterError
    from auditlib.geography.schema import schema

    sch = schema(plan.topdown.schema)
    attr = spec.population.attributes
    if spec.release.kind == "topdown":
        cells = max(
            sch.n_query_cells(q)
            for q in {q for lv in plan.topdown.measured.values() for q, _ in lv}
        )
        if cells * sch.n_cells > sch.MAX_DENSE_ENTRIES:
            raise InvalidParameterError(
                f"Invalid --spec: release.kind = 'topdown' with population.attributes = {attr!r} "
                f"({sch.n_cells:,} cells): the direct estimate's TopDown solves dense query matrices, "
                f"up to {cells:,} × {sch.n_cells:,} entries here (at most "
                f"{sch.MAX_DENSE_ENTRIES:,}); set release.kind = 'allocation' (the allocation's "
                "noisy measurement of the released cell, over the same schema) or "
                "population.attributes = 'pl94_production'"
            )
    if sch.n_cells == 1:
        return
    units = _state_units(plan, key)
    need = 2 * units * sch.n_cells * 8
    if need > MAX_DENSE_BYTES:
        fix = (
            "choose a smaller state (--state) or population.spine_states"
            if plan.strategy.runs_on_spine
            else "lower population.fanout"
        )
        raise InvalidParameterError(
            f"Invalid --spec: population.attributes = {attr!r} ({sch.n_cells:,} cells) over the "
            f"{units:,} units of state {label!r} (blocks and every level above) would need about "
            f"{need / 2**30:.1f} GiB of dense histograms for D and D′ (at most "
            f"{MAX_DENSE_BYTES / 2**30:g} GiB, MAX_DENSE_BYTES); {fix}, or use a smaller schema"
        )


@dataclass(frozen=True)
class _AllocationOf:
    """The allocation's measurements per database level: σ² of the released (level, query)."""

    measured: tuple[tuple[tuple[str, float], ...], ...]
    postprocess: str

    def at(self, db: Any, level: int, query: str) -> Any:
        from auditlib.exceptions import InvalidParameterError
        from auditlib.simulate.direct import Allocation
        from auditlib.simulate.noise import NoiseVariance

        sch = db.schema
        noises = [s for q, s in self.measured[level] if sch.canonical_query(q) == query]
        precision = sum(1.0 / s for s in noises)
        if precision == 0:
            got = sorted({sch.canonical_query(q) for q, _ in self.measured[level]})
            raise InvalidParameterError(
                f"Invalid --query {query!r}: the allocation measures no such query at "
                f"{db.levels[level]!r}; measured there: {', '.join(got) or 'nothing'}"
            )
        # measured once: its own noise (a NoiseVariance: an allocation file's other mechanism)
        noise = noises[0] if len(noises) == 1 else 1.0 / precision
        if len(noises) > 1 and any(isinstance(s, NoiseVariance) for s in noises):
            raise InvalidParameterError(
                f"Invalid --query {query!r}: the allocation measures it {len(noises)} times at "
                f"{db.levels[level]!r}, not all with discrete Gaussian noise; a direct estimate "
                "of the allocation release needs one measurement of it there, or discrete "
                "Gaussian noise on every one (their combined precision)"
            )
        return Allocation(noise, self.postprocess)  # type: ignore[arg-type]


def _change(db: Any, p: SpecDirectParams) -> Any:
    from auditlib.exceptions import InvalidParameterError
    from auditlib.simulate.neighbours_hist import add_person, move_person, remove_person

    need = {"move": ("from_block", "to_block"), "add": ("to_block",), "remove": ("from_block",)}
    if p.change not in need:
        raise InvalidParameterError(
            f"Invalid --change: {p.change!r}; allowed: {', '.join(CHANGES)}"
        )
    for name in need[p.change]:
        if getattr(p, name) is None:
            opt = "--" + name.replace("_", "-")
            raise InvalidParameterError(
                f"--change {p.change} needs {opt} (a block index of the state, 0..{db.n_blocks - 1})"
            )
    if p.change == "add":
        return add_person(db, p.to_block, _cell_ref(p.to_cell or "0"))  # type: ignore[arg-type]
    if p.change == "remove":
        return remove_person(db, p.from_block, _cell_ref(p.from_cell))  # type: ignore[arg-type]
    to_cell = _cell_ref(p.to_cell) if p.to_cell else None
    return move_person(db, p.from_block, _cell_ref(p.from_cell), p.to_block, to_cell)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=4)
def spec_experiment(p: SpecDirectParams) -> SpecExperiment:
    """Resolve an experiment (cached per process: a worker builds D and D′ once per run). Bad
    input raises :class:`~auditlib.exceptions.DPAuditError` naming the value and the fix."""
    return _resolve(p, None)


#: experiments resolved on a plan the flow made, by (parameters, the spine's published name)
_on_plan: dict[tuple[SpecDirectParams, str], SpecExperiment] = {}


def spec_experiment_on(p: SpecDirectParams, plan: Any) -> SpecExperiment:
    """:func:`spec_experiment` on the plan :func:`spine_plan` made in the flow, whose spine the
    flow shared (``plan.spine.shared``): the same experiment, the spine read, not generated
    (cached per process like :func:`spec_experiment`); ``plan`` ``None``: :func:`spec_experiment`."""
    if plan is None:
        return spec_experiment(p)
    key = (p, plan.spine.shared if plan.strategy.runs_on_spine else "")
    if key not in _on_plan:
        if len(_on_plan) >= 4:
            _on_plan.clear()
        _on_plan[key] = _resolve(p, plan)
    return _on_plan[key]


def _resolve(p: SpecDirectParams, plan: Any) -> SpecExperiment:
    from auditlib.exceptions import DPAuditError, InvalidParameterError
    from auditlib.geography.attributes import DETAILED
    from flows.spec import parse_spec

    try:
        data = tomllib.loads(p.spec)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidParameterError(f"Invalid --spec: not valid TOML ({exc})") from None
    spec = parse_spec(data, "--spec")
    try:
        db, release, label = _spec_database(spec, p.state, plan)
    except ValueError as exc:  # the plan names a bad spine state or table
        if isinstance(exc, InvalidParameterError):
            raise
        raise InvalidParameterError(f"Invalid --spec: {exc}") from None
    try:
        level = db.level_index(p.geolevel) if p.geolevel else len(db.levels) - 1
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"--level: {exc}") from None
    try:
        query = db.schema.canonical_query(p.query)
    except DPAuditError as exc:
        raise InvalidParameterError(f"--query: {exc}") from None
    cell = _cell_ref(p.cell)
    if isinstance(cell, str) and query == DETAILED:  # by its levels: the DHC has 1.2 M labels
        try:
            cell = db.check_cell(cell)
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"--cell: {exc}") from None
    if isinstance(cell, str):
        labels = db.schema.cell_labels(query)
        if cell not in labels:
            raise InvalidParameterError(
                f"Unknown --cell {cell!r} of query {query!r}; choose one of "
                f"{', '.join(labels[:8])}{', …' if len(labels) > 8 else ''} (or an index)"
            )
        cell = labels.index(cell)
    if isinstance(release, _AllocationOf):
        release = release.at(db, level, query)
    pair = _change(db, p)
    from auditlib.simulate.direct import Target

    t = Target.check(db, level, p.unit, query, cell)
    return SpecExperiment(pair, release, label, t.level, t.unit, t.query, t.cell)


def check_spec_params(p: SpecDirectParams) -> SpecExperiment:
    """Everything a spec experiment needs, checked before any store is written: the spec, the
    state, the change, the released cell, and that the release publishes that cell (one run)."""
    from auditlib.exceptions import InvalidParameterError
    from auditlib.simulate.direct import MAX_REPLICATES, Target, check_runs, released_values

    for name in ("replicates", "chunk", "stream_chunk", "min_events"):
        v = getattr(p, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            opt = {"replicates": "--reps"}.get(name, "--" + name.replace("_", "-"))
            raise InvalidParameterError(f"Invalid {opt}: {v!r}; pass an integer >= 1")
    if not 0 < p.confidence < 1:
        raise InvalidParameterError(
            f"Invalid --confidence: {p.confidence!r}; pass a number in (0, 1)"
        )
    if p.bin_width is not None and not p.bin_width > 0:
        raise InvalidParameterError(f"Invalid --bin-width: {p.bin_width!r}; pass a number > 0")
    if p.replicates > MAX_REPLICATES:
        raise InvalidParameterError(
            f"Invalid --reps: {p.replicates!r}; the largest allowed is {MAX_REPLICATES} "
            "(MAX_REPLICATES)"
        )
    e = spec_experiment(p)
    import numpy as np

    released_values(
        e.release, e.pair.d, 1, np.random.default_rng(0), level=e.level, unit=e.unit,
        query=e.query, cell=e.cell,
    )  # fmt: skip
    # the runs one task draws at once: refused before any store is written if they cannot fit
    target = Target.check(e.pair.d, e.level, e.unit, e.query, e.cell)
    check_runs(min(p.stream_chunk, p.replicates), e.release, e.pair.d, target, "--stream-chunk")
    return e


def spec_attrs(p: SpecDirectParams) -> dict[str, Any]:
    """What the store records of a spec experiment besides its parameters."""
    e = spec_experiment(p)
    truth_d, truth_dp = e.truth()
    ch = e.pair.change
    return {
        "population": "spec",
        "release": type(e.release).__name__,
        "release_params": repr(e.release),
        "state": e.state,
        "geolevel": e.geolevel,
        "level": e.level,
        "query": e.query,
        "cell_index": e.cell,
        "truth_d": truth_d,
        "truth_d_prime": truth_dp,
        "change_applied": f"{ch.kind} source={ch.source} target={ch.target}",
        **({"epsilon": float(e.release.epsilon)} if hasattr(e.release, "epsilon") else {}),
    }
