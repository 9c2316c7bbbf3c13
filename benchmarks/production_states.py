"""A national production audit run in batches of states (not a test), for a machine whose sessions
are shorter than the audit: each batch is a ``dpaudit run`` of the same spec restricted to some of
its states, and each finished state is recorded in a ledger kept with the benchmarks.

A state's release does not depend on which other states run beside it: its population is drawn
from the spine by the state's own index and seed, and its noise from the spec's seed keyed by the
state's own index (``flows.audit.production``), so the state's blocks, and their checksums, are
those of the whole-nation run (``tests/unit/test_production_states.py`` checks a state's release
alone and among others). The national level (the sum of the states' State histograms) is formed
only by a run that holds every state: a run of the same spec stopped at State
(``release.lowest_level``, ``specs/dhc_production_us_top.toml``), whose State levels are those of
the whole run; ``top`` checks them against the ledger's level checksums.

    # the next batch: the states of SPEC not in LEDGER, smallest first, up to a people budget
    PYTHONPATH=. python benchmarks/production_states.py plan SPEC LEDGER --people 30e6 -o batch.toml
    dpaudit run batch.toml --store batch.zarr --report batch.html
    # the batch's finished states (the staging copy while it runs, or the finished store)
    PYTHONPATH=. python benchmarks/production_states.py record batch.toml batch.zarr LEDGER
    PYTHONPATH=. python benchmarks/production_states.py show SPEC LEDGER
    # the nation and the states in one run stopped at State, checked against the ledger
    dpaudit run benchmarks/specs/dhc_production_us_top.toml --store top.zarr
    PYTHONPATH=. python benchmarks/production_states.py top top.zarr LEDGER
    # the capacity model over PL94 (capacity.py production's costs) and the DHC (the ledger)
    PYTHONPATH=. python benchmarks/production_states.py predict SPEC LEDGER [--deadline-h 12]

The ledger (JSON lines, one per state) keeps, per finished state: its people, the CPU and wall
seconds of its task (over every run that worked on it), the largest peak RSS of the worker
processes that finished it (``ru_maxrss``: the worker's peak so far, an upper bound of the
state's own), its blocks' checksums (``block_sha256``: a later run of the state can be compared;
in all and level by level),
the commit the run started on (the store's ``source_commit``), the date and the machine."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _machine import commit, machine_info  # noqa: E402


def _people(spec_path: str) -> dict[str, int]:
    """People per spine state of the spec's region (every state, whichever the spec runs)."""
    from flows.audit.spine_share import spine_of
    from flows.spec.files import load_spec
    from flows.spec.plan import make_plan
    from flows.spec.sources import spine_state_labels

    spec = load_spec(spec_path)
    plan = make_plan(spec)
    assert plan.spine is not None, "a spine audit"
    people = spine_of(plan.spine).populations()["State"]
    labels = spine_state_labels(spec.audit.region)
    return {labels[i]: int(people[i]) for i in range(len(labels))}


def _ledger(path: str) -> dict[str, dict]:
    p = Path(path)
    if not p.exists():
        return {}
    rows = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return {r["state"]: r for r in rows}


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {v!r}")


def plan_batch(spec_path: str, ledger: str, people: float, out: str, states: list[str]) -> None:
    """Write the spec of the next batch: ``states`` if given, else the states not in the ledger,
    smallest first, while their people stay within ``people``."""
    pops = _people(spec_path)
    done = _ledger(ledger)
    spec = tomllib.loads(Path(spec_path).read_text())
    chosen = spec["population"].get("spine_states", "all")
    pool = list(pops) if chosen == "all" else list(chosen)
    unknown = [st for st in states if st not in pops]
    if unknown:
        print(f"production_states: unknown state(s) {' '.join(unknown)}; the spec's spine has "
              f"{next(iter(pops))} … {list(pops)[-1]}", file=sys.stderr)  # fmt: skip
        sys.exit(2)
    if states:
        batch = states
    else:
        batch, total = [], 0
        for st in sorted((s for s in pool if s not in done), key=lambda s: (pops[s], s)):
            if total + pops[st] > people and batch:
                break
            batch.append(st)
            total += pops[st]
    if not batch:
        sys.exit(f"every state of {spec_path} is in {ledger}")
    spec["population"]["spine_states"] = batch
    states = f"{len(batch)} state{'s' if len(batch) != 1 else ''}"
    spec["audit"]["name"] = f"{spec['audit']['name']} (batch: {states})"
    lines = [f"# a batch of {spec_path} (benchmarks/production_states.py plan)"]
    for section, table in spec.items():
        lines.append(f"\n[{section}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    Path(out).write_text("\n".join(lines) + "\n")
    print(f"{out}: {states}, {sum(pops[s] for s in batch):,} people: {' '.join(batch)}")


def _digest(url: str, state: int, levels: list[int]) -> str:
    """SHA-256 over the checksums of a state's blocks, level by level (``block_sha256``)."""
    import hashlib

    from storage import schema as S
    from storage.residual_blocks import residual_array

    arr = residual_array(url, S.BLOCK_SHA256)
    h = hashlib.sha256()
    for gl in levels:
        h.update(np.asarray(arr[state, gl]).tobytes())
    return h.hexdigest()


def record(spec_path: str, store_url: str, ledger: str) -> None:
    """Add the finished states of a batch's store (its staging copy while the run is unfinished)
    to the ledger; a state already there is checked against its row's checksum instead."""
    import zarr
    from production_progress import store_costs

    from flows.spec.files import load_spec
    from flows.spec.plan import make_plan

    spec = load_spec(spec_path)
    plan = make_plan(spec)
    pops = _people(spec_path)
    where, done, costs = store_costs(spec, plan, store_url)
    rows = _ledger(ledger)
    added = []
    # the commit the run started on (its workers' code), not this checkout's, and any other
    # commit that resumed it
    attrs = dict(zarr.open_group(where.url, mode="r").attrs)
    source = str(attrs.get("source_commit", ""))
    later = [str(c)[:7] for c in attrs.get("resumed_commits") or []]
    run_commit = "+".join([source[:7], *later]) if source else f"unknown (checkout {commit()})"
    with open(ledger, "a", encoding="utf-8") as out:
        for i, st in enumerate(plan.states):
            levels = [b.level for b in plan.blocks if b.state == i]
            if st == "US" or not all((i, gl) in done for gl in levels):
                continue
            digest = _digest(where.url, i, levels)
            # level by level too: a level's release depends only on the levels above it, so a
            # later run stopped higher (or on other code) can be compared level by level
            by_level = {plan.geolevels[gl]: _digest(where.url, i, [gl]) for gl in levels}
            if st in rows:
                kept = rows[st].get("blocks_sha256")
                same = (
                    "no checksum kept" if kept is None else "same" if kept == digest else "DIFFER"
                )
                levels_kept = rows[st].get("level_sha256") or {}
                differ = [g for g, d in levels_kept.items() if by_level.get(g) != d]
                if levels_kept:
                    same += f"; levels differing: {', '.join(differ) or 'none'}"
                print(f"{st}: in the ledger already (blocks: {same})")
                continue
            if not np.isfinite(costs["cpu_s"][i]):
                print(f"{st}: finished, but no cost kept (finished by an older run): not added")
                continue
            row = {
                "state": st,
                "people": pops[st],
                "cpu_s": round(float(costs["cpu_s"][i]), 1),
                "wall_s": round(float(costs["wall_s"][i]), 1),
                "worker_peak_rss_gb": round(float(costs["peak_rss"][i]) / 1e9, 2),
                "ms_per_person": round(1e3 * float(costs["cpu_s"][i]) / pops[st], 3),
                "blocks_sha256": digest,
                "level_sha256": by_level,
                "spec": Path(spec_path).name,
                "commit": run_commit,
                "recorded": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "machine": machine_info(),
            }
            out.write(json.dumps(row) + "\n")
            added.append(st)
    print(f"added {len(added)} state(s) to {ledger}: {' '.join(added)}")


def show(spec_path: str, ledger: str) -> None:
    """The ledger against the spec: states done, people, CPU, the largest worker peak, and the
    CPU the rest should need at the median CPU a person."""
    pops = _people(spec_path)
    rows = _ledger(ledger)
    print(f"{'state':<6} {'people':>11} {'CPU-s':>8} {'wall s':>8} {'peak GB':>8} "
          f"{'ms/person':>9}  commit")  # fmt: skip
    for st, r in sorted(rows.items(), key=lambda kv: -kv[1]["people"]):
        wall = "—" if r["wall_s"] is None else f"{r['wall_s']:.0f}"
        figures = f"{r['cpu_s']:>8.0f} {wall:>8} {r['worker_peak_rss_gb']:>8.2f}"
        print(f"{st:<6} {r['people']:>11,} {figures} {r['ms_per_person']:>9.3f}  {r['commit']}")
    done = sum(r["people"] for r in rows.values())
    left = sum(p for s, p in pops.items() if s not in rows)
    cpu = sum(r["cpu_s"] for r in rows.values())
    top = max(rows, key=lambda st: rows[st]["worker_peak_rss_gb"], default=None)
    peak = 0.0 if top is None else rows[top]["worker_peak_rss_gb"]
    print(f"states done: {len(rows)} of {len(pops)}; people {done:,} of {done + left:,}")
    print(
        f"CPU-s {cpu:,.0f} ({cpu / 3600:.1f} CPU-hours); largest worker peak {peak:.2f} GB ({top})"
    )
    if rows:
        rates = [r["ms_per_person"] for r in rows.values()]
        print(
            f"ms of CPU a person: {min(rates):.3f} to {max(rates):.3f}, median {np.median(rates):.3f}"
        )
    if rows and not left:
        commits = sorted({c for r in rows.values() for c in r["commit"].split("+")})
        print(f"every state done, over {len(commits)} commits: {' '.join(commits)}")
    if rows and left:
        rate = float(np.median([r["ms_per_person"] for r in rows.values()]))
        print(
            f"the rest ≈ {rate * left / 3.6e6:.1f} CPU-hours at the median {rate:.3f} ms a person"
        )
        rest = " ".join(s for s in pops if s not in rows)
        print(textwrap.fill(f"not done: {rest}", 80, subsequent_indent="  "))


def predict(
    spec_path: str,
    ledger: str,
    replicates: list[int],
    workers: list[int],
    deadline_h: float,
    bytes_per_person: float,
    batches_only: bool = False,
) -> None:
    """The capacity model (``production_model``) over PL94 and DHC together: PL94's per-state
    costs as ``capacity.py production`` has them, the DHC's from the ledger (a recorded state's
    CPU as its replicate's, the population's draw included; the others from a fit in people over
    the recorded ones, or ``batches_only`` the batches' rows, those with blocks' checksums), each
    task a range of 25 replicates, or one; the fewest workers for the deadline. The DHC's stored
    bytes: ``bytes_per_person`` × people (0: not counted)."""
    import capacity
    from production_model import ProductionState, fit_linear, predict_production, workers_needed

    from auditlib.geography.spine import generate_spine

    _, _, rows = capacity.production_measured()
    pl94, _ = capacity.production_states(rows)
    costs = capacity.load_costs()[0] if capacity.MEASURE_JSON.exists() else None
    fixed = {
        "task_s": costs.task_s if costs else 0.3,
        "worker_s": max(r["spine_cpu_s"] for r in rows),
        "flow_s": costs.flow_s if costs else 0.0,
        "write_mb_s": capacity.S3_WORKER_MB_S,
        "store_mb_s": capacity.S3_AGGREGATE_MB_S,
    }
    done = _ledger(ledger)
    basis = [r for r in done.values() if r["blocks_sha256"] or not batches_only]
    if len(basis) < 2:
        sys.exit(f"{ledger}: need at least 2 recorded states to fit the others")
    people = [float(r["people"]) for r in basis]
    cpu = fit_linear(people, [r["cpu_s"] for r in basis])
    peak = fit_linear(people, [1e3 * r["worker_peak_rss_gb"] for r in basis])
    sp = generate_spine(capacity.SEED)
    blocks = sp.units_per_state("Block")
    dhc = []
    for label, p in _people(spec_path).items():
        r = done.get(label)
        b = int(blocks[int(label[2:]) - 1])
        c = r["cpu_s"] if r else max(0.0, cpu(p))
        mb = 1e3 * r["worker_peak_rss_gb"] if r else max(0.0, peak(p))
        dhc.append(ProductionState(f"DHC {label}", b, p, 0.0, c, bytes_per_person * p, mb))
    fitted = (
        f"DHC: {len(done)} states recorded, {len(basis)} fitted; the others at CPU-s ≈ "
        f"{cpu.a:.0f} + {1e3 * cpu.b:.3f} ms × people (worst error on the fitted "
        f"{cpu.max_rel_err:.0%})"
    )
    print(textwrap.fill(fitted, 80, subsequent_indent="  "))
    out = []
    for reps in replicates:
        for split in sorted({min(25, reps), 1}, reverse=True):
            for n in workers:
                row: dict = {"replicates": reps, "replicates_per_task": split, "workers": n}
                for name, states in (("pl94", pl94), ("dhc", dhc), ("both", pl94 + dhc)):
                    p = predict_production(states, reps, n, replicates_per_task=split, **fixed)
                    row[f"{name}_wall_h"] = round(p.wall_s / 3600, 2)
                    row[f"{name}_core_h"] = round(p.cpu_s / 3600, 1)
                    row[f"{name}_bound"] = p.bound
                out.append(row)
                print(f"{reps:>4} replicates, {split:>2}/task, {n:>4} workers: PL94 "
                      f"{row['pl94_wall_h']:.2f} h, DHC {row['dhc_wall_h']:.2f} h, both "
                      f"{row['both_wall_h']:.2f} h\n{'':>9}({row['both_core_h']:.0f} core-h; "
                      f"{row['both_bound']})")  # fmt: skip
            need = workers_needed(
                pl94 + dhc, reps, deadline_h * 3600, replicates_per_task=split, **fixed
            )
            print(f"{reps} replicates of both, {split} a task: {need or 'no number of'} "
                  f"one-core workers within {deadline_h:g} h")  # fmt: skip
    from _results import write_rows

    name = "capacity_dhc_batches.csv" if batches_only else "capacity_dhc.csv"
    write_rows(HERE / "results" / name, out)


def top(store_url: str, ledger: str) -> None:
    """A store of the spec stopped at State (every state, ``release.lowest_level``) against the
    ledger: per state, whether its State level's checksum is the ledger's (kept level by level
    since batch 4)."""
    from storage import store
    from storage.residual_blocks import done_blocks

    attrs = store.root_attrs(store_url)
    res = store.open_group(store_url, "residuals")
    states = [str(s) for s in res.state.values]
    levels = [str(g) for g in res.geolevel.values]
    gl = levels.index("State")
    done = done_blocks(store_url)
    rows = _ledger(ledger)
    tally: dict[str, list[str]] = {
        "same": [],
        "DIFFER": [],
        "no level checksum": [],
        "not done": [],
    }
    for i, st in enumerate(states):
        if st == "US":
            continue
        if (i, gl) not in done:
            tally["not done"].append(st)
            continue
        kept = (rows.get(st, {}).get("level_sha256") or {}).get("State")
        if kept is None:
            tally["no level checksum"].append(st)
            continue
        tally["same" if _digest(store_url, i, [gl]) == kept else "DIFFER"].append(st)
    print(f"{store_url}: run {attrs.get('run_id')}, commit {str(attrs.get('source_commit'))[:7]}")
    for what, sts in tally.items():
        print(f"State level {what}: {len(sts)}{': ' + ' '.join(sts) if sts else ''}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan", help="write the spec of the next batch of states")
    p.add_argument("spec")
    p.add_argument("ledger")
    p.add_argument("--people", type=float, default=30e6)
    p.add_argument("--states", nargs="*", default=[])
    p.add_argument("-o", "--out", required=True)
    r = sub.add_parser("record", help="add a batch's finished states to the ledger")
    r.add_argument("spec")
    r.add_argument("store")
    r.add_argument("ledger")
    s = sub.add_parser("show", help="the ledger against the spec")
    s.add_argument("spec")
    s.add_argument("ledger")
    q = sub.add_parser("predict", help="PL94 + DHC national audits on N workers (capacity model)")
    q.add_argument("spec")
    q.add_argument("ledger")
    q.add_argument("--replicates", default="1,100")
    q.add_argument("--workers", default="16,64,256")
    q.add_argument("--deadline-h", type=float, default=12.0)
    q.add_argument("--bytes-per-person", type=float, default=0.0)
    q.add_argument("--batches-only", action="store_true", help="fit on the batches' rows only")
    t = sub.add_parser("top", help="a run stopped at State against the ledger's State levels")
    t.add_argument("store")
    t.add_argument("ledger")
    args = ap.parse_args()
    if args.cmd == "predict":
        predict(
            args.spec, args.ledger, [int(x) for x in args.replicates.split(",")],
            [int(x) for x in args.workers.split(",")], args.deadline_h, args.bytes_per_person,
            args.batches_only,
        )  # fmt: skip
    elif args.cmd == "plan":
        plan_batch(args.spec, args.ledger, args.people, args.out, args.states)
    elif args.cmd == "record":
        record(args.spec, args.store, args.ledger)
    elif args.cmd == "top":
        top(args.store, args.ledger)
    else:
        show(args.spec, args.ledger)


if __name__ == "__main__":
    main()
