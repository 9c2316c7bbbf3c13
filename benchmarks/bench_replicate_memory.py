"""Where a production audit's memory grows with its replicates: ``dpaudit run`` of one state of a
production spec at several replicate counts (one local worker, the state's replicates in one task),
every process's resident memory sampled every 0.2 s and split by the run's own stages (its log
lines: the simulation until "simulate: … done", the EPL until "epl done", then the rest of the
flow), the largest single process in each. A benchmark, not a test.

    PYTHONPATH=. python benchmarks/bench_replicate_memory.py SPEC --state ST41 --replicates 1,8,16

One JSON line per run in ``results/replicate_memory.jsonl`` (``--out``), with the machine and the
commit. Exit 2, with nothing recorded, on a spec that does not load or a state it does not have.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _machine import commit, machine_info  # noqa: E402

#: the stages of the run, by the line that ends each ("HH:MM:SS" clock time in the run's log)
STAGES = (("simulate", r"simulate: .* done"), ("epl", r"epl done"), ("rest", r"flow finished"))
_LINE = re.compile(r"^dpaudit: (\d\d):(\d\d):(\d\d) (.*)$")


def refuse(message: str) -> NoReturn:
    """One line on stderr and exit 2: nothing is recorded."""
    print(f"bench_replicate_memory: {message}", file=sys.stderr)
    raise SystemExit(2)


def spec_for(spec_path: str, state: str, replicates: int) -> dict[str, Any]:
    """The spec's data restricted to ``state`` at ``replicates``, on one local worker."""
    import tomllib

    data = tomllib.loads(Path(spec_path).read_text())
    data["audit"]["replicates"] = replicates
    data["population"]["spine_states"] = [state]
    data.setdefault("cluster", {})["n_workers"] = 1
    data["cluster"]["replicates_per_task"] = 0  # every replicate in the state's one task
    return data


def check(spec_path: str, state: str) -> None:
    """Exit 2 in one line when the spec does not load or lacks ``state``."""
    from flows.spec.files import load_spec
    from flows.spec.sources import spine_state_labels

    try:
        spec = load_spec(spec_path)
    except Exception as e:  # the loader's own message names the bad value
        refuse(f"{spec_path}: {str(e).splitlines()[0]}")
    labels = spine_state_labels(spec.audit.region)
    if state not in labels:
        refuse(f"no state {state!r} in {spec_path}; e.g. {labels[0]}")


def stage_ends(text: str, day: datetime) -> dict[str, float]:
    """Epoch seconds at which each stage of :data:`STAGES` ended, from the run's log lines."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        h, mi, s, what = int(m[1]), int(m[2]), int(m[3]), m[4]
        t = day.replace(hour=h, minute=mi, second=s, microsecond=0).timestamp()
        for name, pattern in STAGES:
            if name not in out and re.search(pattern, what):
                out[name] = t + 1.0  # the line's clock has whole seconds
    return out


def run_once(spec_path: str, state: str, replicates: int, tmp: Path) -> dict[str, Any]:
    import psutil
    from bench_orchestration import run_sampled

    from flows.spec.toml_writer import dump_toml

    spec = tmp / f"r{replicates}.toml"
    spec.write_text(dump_toml(spec_for(spec_path, state, replicates)))
    dpaudit = Path(sys.executable).with_name("dpaudit")
    cmd = [str(dpaudit), "run", str(spec), "--store", str(tmp / f"r{replicates}.zarr"),
           "--no-report", "--overwrite"]  # fmt: skip
    samples: list[tuple[float, str, int]] = []
    role: dict[int, str] = {}

    def sample(p: psutil.Process, root: bool) -> int:
        if p.pid not in role:
            line = " ".join(p.cmdline())
            role[p.pid] = "flow" if root else ("server" if "uvicorn" in line else "dask")
        rss = int(p.memory_info().rss)
        samples.append((time.time(), role[p.pid], rss))
        return rss

    day = datetime.now().astimezone()
    wall, peak, text = run_sampled(cmd, sample, lambda: None)
    ends = stage_ends(text, day)
    if len(ends) < len(STAGES):
        refuse(f"the run's log lacks a stage's end: {sorted(ends)}")
    row: dict[str, Any] = {"replicates": replicates, "wall_s": round(wall, 1)}
    start = 0.0
    for name, _ in STAGES:
        inside = [(r, n) for t, r, n in samples if start <= t < ends[name]]
        for who in ("dask", "flow"):
            row[f"{name}_{who}_peak_gb"] = round(max((n for r, n in inside if r == who),
                                                     default=0) / 1e9, 3)  # fmt: skip
        start = ends[name]
    row["tree_peak_gb"] = round(peak / 1e9, 3)  # the largest sum over every process at once
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("--state", required=True)
    ap.add_argument("--replicates", default="1,8,16", help="comma-separated counts")
    ap.add_argument("--out", default=str(HERE / "results" / "replicate_memory.jsonl"))
    args = ap.parse_args()
    try:
        counts = [int(x) for x in args.replicates.split(",")]
    except ValueError:
        refuse(f"--replicates {args.replicates!r}: give e.g. 1,8,16")
    if not counts or min(counts) < 1:
        refuse(f"--replicates {args.replicates!r}: counts of at least 1")
    check(args.spec, args.state)
    head = {
        "measured_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "commit": commit(),
        "spec": Path(args.spec).name,
        "state": args.state,
    }
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="replicate-memory-"))
    try:
        for r in counts:
            rows.append({**head, **run_once(args.spec, args.state, r, tmp)})
            print(json.dumps(rows[-1]))
            shutil.rmtree(tmp / f"r{r}.zarr", ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(args.out, "a", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    print(f"{len(rows)} run(s) added to {args.out}")


if __name__ == "__main__":
    main()
