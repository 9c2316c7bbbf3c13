"""Whether two checkouts write the same experiment stores: run the four experiment commands
(``sweep``, ``mpl-coverage``, ``fdp-coverage``, ``direct`` with and without ``--spec``) with small
parameters, then hash every array of each store.

Usage (each checkout's interpreter and ``PYTHONPATH`` run its own commands)::

    PYTHONPATH=CHECKOUT python benchmarks/experiment_identity.py run OUT_DIR
    python benchmarks/experiment_identity.py compare A/digests.json B/digests.json
    python benchmarks/experiment_identity.py hash OUT_DIR  # the digests again, of the stores there

A store's digest is the sha256 over its arrays in sorted path order (each array's path, dtype,
shape and bytes as zarr reads them), and over every node's metadata (its ``zarr.json``, keys sorted)
but for the attributes that differ between two runs of one command (:data:`SKIPPED_ATTRS`). Per-array digests
are kept too, so a difference names the array.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import zarr

#: attributes that differ between two runs of the same command (the experiment stores record no
#: times or software versions): the Prefect flow run and API, the Dask scheduler's address, and the
#: digests of the metadata documents' bytes, whose per-array digest maps list the arrays in the
#: order zarr lists them (which varies from run to run; the digests in them do not)
SKIPPED_ATTRS = frozenset(
    {
        "prefect_api",
        "prefect_flow_run_id",
        "dask_scheduler",
        "dpaudit_root_sha256",
        "dpaudit_metadata_sha256",
    }
)

#: a spec of one small state, TopDown (as tests/integration/test_direct_spec_flow.py)
TOPDOWN_SPEC = """[audit]
allocation = "pl94_2021_production"
replicates = 1
seed = 11

[population]
states = 1
mean_block_population = 200.0
empty_block_share = 0.0

[population.fanout]
County = 2
Tract = 1
Block_Group = 1
Block = 2

[release]
kind = "topdown"
"""


SWEEP = "sweep -a dhcp_20220825_paper -n add_remove -d 1e-5 -d 1e-10 --points 30"
MPL_COVERAGE = (
    "mpl-coverage -m laplace -m laplace_broken -e 0.7 -e 1.5 --reps 30 --n 2000 --N 5000 --seed 5"
)
FDP_COVERAGE = (
    "fdp-coverage -m gaussian -m laplace_broken -p 1 --reps 20 --n-select 2000 --n 10000 "
    "--conf 0.9 --tests 16 --seed 5"
)
DIRECT = (
    "direct --people 5000 --levels 2 --mean 20 -a gdpc -e 1 --to-leaf 100 --reps 400 --chunk 100 "
    "--seed 4 --min-events 20"
)
DIRECT_SPEC = (
    "direct --change move --from-block 1 --to-block 2 --level County --unit 0 --reps 600 "
    "--chunk 250 --stream-chunk 200 --seed 7"
)


def commands(out: Path) -> dict[str, list[str]]:
    """The commands to run, by store name (each writes ``out/<name>.zarr``)."""
    spec = out / "topdown.toml"
    spec.write_text(TOPDOWN_SPEC)
    return {
        name: args.split() + extra
        for name, args, extra in (
            ("sweep", SWEEP, []),
            ("mpl", MPL_COVERAGE, []),
            ("fdp", FDP_COVERAGE, []),
            ("direct", DIRECT, []),
            ("direct_spec", DIRECT_SPEC, ["--spec", str(spec)]),
        )
    }


def run(out: Path) -> dict[str, dict[str, str]]:
    """Run every command into ``out`` and write (and return) the digests of its stores."""
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    for name, args in commands(out).items():
        cmd = [sys.executable, "-m", "flows.cli", *args, "--store", str(out / f"{name}.zarr")]
        print("$", " ".join(cmd[2:]), flush=True)
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        (out / f"{name}.log").write_text(done.stdout + done.stderr)
        if done.returncode:
            raise SystemExit(f"{name} failed ({done.returncode}); see {out / name}.log")
    return write_digests(out)


def write_digests(out: Path) -> dict[str, dict[str, str]]:
    """The digests of every store in ``out``, also written to ``out/digests.json``."""
    digests = {p.name.removesuffix(".zarr"): store_digests(p) for p in sorted(out.glob("*.zarr"))}
    (out / "digests.json").write_text(json.dumps(digests, indent=1, sort_keys=True))
    return digests


def _metadata(url: Path, path: str) -> str:
    """A node's ``zarr.json`` as canonical JSON (keys sorted), without :data:`SKIPPED_ATTRS`."""
    doc = json.loads((url / path / "zarr.json").read_text())
    doc["attributes"] = {
        k: v for k, v in doc.get("attributes", {}).items() if k not in SKIPPED_ATTRS
    }
    return json.dumps(doc, sort_keys=True)


def store_digests(url: Path) -> dict[str, str]:
    """Per array path a sha256 of its dtype, shape and bytes, and per node (``meta:<path>``) one of
    its metadata (:func:`_metadata`); ``*`` is the store's digest, over all of them in order."""
    root = zarr.open_group(str(url), mode="r", zarr_format=3)
    out: dict[str, str] = {}
    nodes: list[tuple[str, Any]] = [("", root), *root.members(max_depth=None)]
    for path, node in nodes:
        out[f"meta:{path}"] = hashlib.sha256(_metadata(url, path).encode()).hexdigest()
        if isinstance(node, zarr.Array):
            data = np.asarray(node[...])
            h = hashlib.sha256(f"{path}|{data.dtype}|{data.shape}".encode())
            if data.dtype.kind == "O":
                h.update(json.dumps(data.ravel().tolist(), default=str).encode())
            else:
                h.update(np.ascontiguousarray(data).tobytes())
            out[path] = h.hexdigest()
    whole = hashlib.sha256()
    for k in sorted(out):
        whole.update(f"{k}={out[k]}\n".encode())
    out["*"] = whole.hexdigest()
    return out


def compare(a: Path, b: Path) -> int:
    """Print, per store, its digest under both and the entries that differ; 1 if any differ."""
    da, db = json.loads(a.read_text()), json.loads(b.read_text())
    differ = 0
    for name in sorted(set(da) | set(db)):
        sa, sb = da.get(name, {}), db.get(name, {})
        arrays = sum(1 for k in sa if k != "*" and not k.startswith("meta:"))
        same = sa == sb and bool(sa)
        print(
            f"{name:<12} {arrays:3d} arrays  {sa.get('*', '-')[:16]}  {sb.get('*', '-')[:16]}  "
            f"{'identical' if same else 'DIFFERENT'}"
        )
        for k in sorted(set(sa) | set(sb)):
            if k != "*" and sa.get(k) != sb.get(k):
                print(f"    differs: {k}")
        differ |= not same
    return int(differ)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "run":
        run(Path(argv[1]))
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return compare(Path(argv[1]), Path(argv[2]))
    if len(argv) == 2 and argv[0] == "hash":
        write_digests(Path(argv[1]))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
