"""One sha256 per store of small `dpaudit run`s covering every release kind, to show that a change
of the code leaves every stored value as it was.

    python benchmarks/store_identity.py [--tree DIR | --rev REV] [--only NAME,...] [--keep DIR]
    python benchmarks/store_identity.py --digest DIR   # hash the stores a --keep run left in DIR
    python benchmarks/store_identity.py --compare OLD NEW   # two --keep runs: array by array

Each spec (allocation on synthetic states, TopDown on synthetic states, on a spine state and on a
table's levels, a production schema's sparse TopDown, geometric GDPC / ADPC of a tree and of a
table, stratified SA3 / SA4 of a table, a published release) runs with ``dpaudit run`` of the tree
``DIR`` (default: this checkout; ``--rev``: a temporary worktree of that revision). Printed per
store: the sha256 over its arrays (sorted paths, each path's dtype, shape and bytes read through
zarr) and attributes (sorted JSON, without timestamps, wall times, software versions and the
commit), and the sha256 of its HTML report with such run-time fields masked.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from flows.spec.toml_writer import dump_toml

ROOT = Path(__file__).resolve().parents[1]
#: where every spec runs, whichever tree's code (the stores hold their tables' absolute paths)
RUN_DIR = Path(tempfile.gettempdir()) / "dpaudit-store-identity"

#: attributes that change from run to run, not with the numbers: timestamps, wall times, software,
#: the commit, the Prefect run, a production run's measured costs per state, and the digests of the metadata documents (they hold the former,
#: and their checksum maps in the order the blocks finished; the documents' contents are hashed)
RUNTIME_ATTRS = {
    "created_utc",
    "wall_time_s",
    "software",
    "source_commit",
    "dpaudit_version",
    "prefect_flow_run_id",
    "dpaudit_metadata_sha256",
    "dpaudit_root_sha256",
    "state_costs",
}
RUNTIME_WORDS = ("time", "utc", "wall", "software", "commit", "version", "seconds", "host")

TINY_FANOUT = {
    "County": 1,
    "Prim": 1,
    "Tract_Subset_Group": 1,
    "Tract_Subset": 1,
    "Block_Group": 1,
    "Block": 2,
}
SMALL = {"deltas": [1e-10], "eps_grid_points": 20, "composed": False}


def write_inputs(d: Path) -> None:
    """The tables the table specs read (fixed content)."""
    rows = ["state,county,persons"] + [f"S{i // 20},C{i:02d},{100 + 7 * i}" for i in range(60)]
    (d / "counties.csv").write_text("\n".join(rows) + "\n")
    rows = ["county,tract,a,b"] + [f"C{i // 10},T{i:02d},{20 + i},{3 * i}" for i in range(40)]
    (d / "tracts.csv").write_text("\n".join(rows) + "\n")
    rng = np.random.default_rng(7)
    p = 1 - np.exp(-0.5)
    lines = ["State,County,persons," + ",".join(f"dp{r}" for r in range(30))]
    truth = [100 + 7 * i for i in range(60)]
    noise = [(rng.geometric(p, 60) - rng.geometric(p, 60)).tolist() for _ in range(30)]
    for i in range(60):
        dp = ",".join(str(truth[i] + noise[r][i]) for r in range(30))
        lines.append(f"S{i // 20},C{i:02d},{truth[i]},{dp}")
    (d / "published.csv").write_text("\n".join(lines) + "\n")
    shutil.copy(ROOT / "examples" / "country" / "country.csv", d / "country.csv")


def specs() -> dict[str, dict[str, Any]]:
    spine_state = {"kind": "spine", "seed": 7, "spine_states": ["ST13"]}
    prod = "pl94_2021_production"
    flaxman = {"kind": "flaxman", "people": 40_000, "levels": 2, "mean_per_location": 40.0}
    counties = {"kind": "table", "path": "counties.csv", "counts": ["persons"]}
    counties |= {"levels": ["state"], "unit": "county"}
    tracts = {"kind": "table", "path": "tracts.csv", "counts": ["a", "b"]}
    tracts |= {"levels": ["county"], "unit": "tract"}
    country_levels = {"US": "All", "State": "region", "County": "district", "Tract": ""}
    country_levels |= {"Block_Group": "", "Block": "village"}

    def release_spec(seed: int, population: dict[str, Any], **release: Any) -> dict[str, Any]:
        """20 replicates of ``release`` on ``population``, the EPL at bandwidth factor 0.3."""
        return {
            "audit": {"replicates": 20, "seed": seed},
            "population": population,
            "release": release,
            "epl": {"bandwidth_factor": 0.3},
        }

    return {
        "allocation": {
            "audit": {"replicates": 2, "seed": 11},
            "population": {"states": 1, "fanout": TINY_FANOUT},
            "simulation": {"max_cells_per_query": 2},
            "accounting": SMALL,
        },
        "topdown_synthetic": {
            "audit": {"allocation": prod, "replicates": 3, "seed": 11},
            "population": {"states": 2, "attributes": "total"}
            | {"fanout": {"County": 2, "Tract": 2, "Block_Group": 2, "Block": 3}},
            "release": {"kind": "topdown"},
            "accounting": SMALL,
        },
        "topdown_spine": {
            "audit": {"allocation": prod, "replicates": 2, "seed": 11},
            "population": spine_state,
            "release": {"kind": "topdown"},
            "accounting": SMALL,
        },
        "production_sparse": {
            "audit": {"allocation": prod, "replicates": 2, "seed": 11},
            "population": spine_state | {"attributes": "pl94_production"},
            "release": {"kind": "topdown"},
            "epl": {"n_boot": 20, "n_null": 20},
            "accounting": SMALL,
        },
        "flaxman_gdpc": release_spec(3, flaxman, kind="gdpc", epsilon=0.5),
        "flaxman_adpc": release_spec(3, flaxman, kind="adpc", epsilon=0.5, n_runs=4),
        "table_gdpc": release_spec(5, counties, kind="gdpc", epsilon=0.5),
        "table_sa3": release_spec(4, tracts, kind="sa3", epsilon=0.5, epsilon_strata=0.5),
        "table_sa4": release_spec(4, tracts, kind="sa4", epsilon=0.5),
        "table_topdown": {
            "audit": {"allocation": prod, "replicates": 3, "seed": 1},
            "population": {"kind": "table", "path": "country.csv", "unit": "village"}
            | {"levels": ["region", "district"], "attributes": "pl94"},
            "release": {"kind": "topdown", "levels": country_levels},
            "accounting": SMALL,
        },
        "observed": {
            "population": {"kind": "table", "path": "published.csv", "counts": ["persons"]}
            | {"levels": ["State"], "unit": "County"},
            "release": {"kind": "observed", "published": [[f"dp{r}"] for r in range(30)]},
            "accounting": SMALL,
        },
    }


def _clean(attrs: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in sorted(attrs.items())
        if k not in RUNTIME_ATTRS and not any(w in k.lower() for w in RUNTIME_WORDS)
    }


def store_digest(url: str) -> str:
    """sha256 over every array (sorted paths: dtype, shape, bytes) and the groups' attributes."""
    import zarr

    h = hashlib.sha256()
    items = list(_nodes(zarr.open_group(url, mode="r")).items())
    for path, node in sorted(items, key=lambda x: x[0]):
        h.update(path.encode())
        h.update(json.dumps(_clean(dict(node.attrs)), sort_keys=True, default=str).encode())
        if not isinstance(node, zarr.Group):
            data = np.asarray(node[...])
            h.update(f"{data.dtype}{data.shape}".encode())
            if data.dtype == object:
                h.update(json.dumps(data.tolist(), default=str).encode())
            else:
                h.update(np.ascontiguousarray(data).tobytes())
    return h.hexdigest()


#: run-time text of a report: its table of the run-time attributes above, timestamps, durations,
#: commits, versions, random element ids
MASKS = [
    re.compile(rf'<th scope="row">({"|".join(sorted(RUNTIME_ATTRS))})</th><td>.*?</td>'),
    re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d)?(\.\d+)?(\+\d\d:\d\d|Z| UTC)?"),
    re.compile(r"\b[0-9a-f]{40}\b"),
    re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"),
    re.compile(r"\d+(\.\d+)?\s?(s|min|h|ms)\b"),
    re.compile(r'"(python|numpy|scipy|xarray|zarr|dask|distributed|prefect|dpaudit)": "[^"]*"'),
    re.compile(r"(wall|elapsed|took|version)[^<]{0,80}", re.I),
]


def _nodes(group: Any, prefix: str = "") -> dict[str, Any]:
    import zarr

    out = {prefix or "/": group}
    for name, member in sorted(group.members()):
        path = f"{prefix}/{name}"
        out.update(_nodes(member, path) if isinstance(member, zarr.Group) else {path: member})
    return out


def _same(a: Any, b: Any) -> bool:
    x, y = np.asarray(a[...]), np.asarray(b[...])
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if x.dtype == object:
        return bool(json.dumps(x.tolist(), default=str) == json.dumps(y.tolist(), default=str))
    return bool(np.ascontiguousarray(x).tobytes() == np.ascontiguousarray(y).tobytes())


def compare_stores(old: Path, new: Path) -> int:
    """Per store of two ``--keep`` directories: how many arrays, which differ (bytes, dtype or
    shape), and which attributes differ beside the run-time ones; 1 if any array differs."""
    import zarr

    differ = 0
    for a_url in sorted(old.glob("*.zarr")):
        b_url = new / a_url.name
        if not b_url.exists():
            print(f"{a_url.name}: not in {new}")
            differ = 1
            continue
        a = _nodes(zarr.open_group(str(a_url), mode="r"))
        b = _nodes(zarr.open_group(str(b_url), mode="r"))
        arrays = [p for p in a if not isinstance(a[p], zarr.Group)]
        bad = sorted(
            {p for p in set(a) ^ set(b)} | {p for p in arrays if p in b and not _same(a[p], b[p])}
        )
        attrs = sorted(
            f"{p}:{k}"
            for p in set(a) & set(b)
            for k in set(_clean(dict(a[p].attrs))) | set(_clean(dict(b[p].attrs)))
            if json.dumps(dict(a[p].attrs).get(k), sort_keys=True, default=str)
            != json.dumps(dict(b[p].attrs).get(k), sort_keys=True, default=str)
        )
        differ |= bool(bad)
        print(
            f"{a_url.name}: {len(arrays)} arrays, {len(bad)} differ {bad[:5]}; attributes: {attrs}"
        )
    return differ


def report_digest(path: Path) -> str:
    if not path.exists():
        return "no report"
    text = path.read_text(encoding="utf-8")
    for m in MASKS:
        text = m.sub("#", text)
    return hashlib.sha256(text.encode()).hexdigest()


def run_all(tree: Path, work: Path, only: list[str]) -> dict[str, tuple[str, str]]:
    write_inputs(work)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out: dict[str, tuple[str, str]] = {}
    for name, spec in specs().items():
        if only and name not in only:
            continue
        (work / f"{name}.toml").write_text(dump_toml(spec))
        cmd = [sys.executable, "-m", "flows.cli", "run", f"{name}.toml"]
        cmd += ["--store", f"{name}.zarr", "--report", f"{name}.html", "--overwrite"]
        done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{name}: dpaudit run failed ({done.returncode})\n{done.stderr[-3000:]}")
            out[name] = ("failed", "failed")
            continue
        out[name] = (store_digest(str(work / f"{name}.zarr")), report_digest(work / f"{name}.html"))
        print(f"{name:20s} store {out[name][0]}  report {out[name][1]}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=ROOT, help="checkout whose code runs")
    ap.add_argument("--rev", help="a git revision: run it in a temporary worktree")
    ap.add_argument("--only", default="", help="comma-separated spec names")
    ap.add_argument("--keep", type=Path, help="copy the stores and reports to DIR")
    ap.add_argument("--digest", type=Path, help="only hash the stores a --keep run left in DIR")
    ap.add_argument(
        "--compare",
        type=Path,
        nargs=2,
        metavar=("OLD", "NEW"),
        help="two --keep directories: every array compared, attributes that differ",
    )
    args = ap.parse_args()
    if args.compare:
        raise SystemExit(compare_stores(*args.compare))
    only = [s for s in args.only.split(",") if s]
    if args.digest:
        for name in specs():
            url = args.digest / f"{name}.zarr"
            if url.exists() and (not only or name in only):
                got = store_digest(str(url)), report_digest(args.digest / f"{name}.html")
                print(f"{name:20s} store {got[0]}  report {got[1]}")
        return
    tmp = Path(tempfile.mkdtemp(prefix="store-identity-"))
    # one run directory for every tree: a table's path is in its store's spec and attributes
    work = RUN_DIR
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tree = args.tree.resolve()
    try:
        if args.rev:
            tree = tmp / "tree"
            git = ["git", "-C", str(ROOT), "worktree"]
            subprocess.run([*git, "add", "--detach", str(tree), args.rev], check=True)
        print(f"tree {tree}")
        run_all(tree, work, only)
        if args.keep:
            shutil.copytree(work, args.keep, dirs_exist_ok=True)
    finally:
        if args.rev:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
