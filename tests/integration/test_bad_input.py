"""Bad input to every command: exit 2 with exactly one ``dpaudit: error:`` line (or Typer's one usage
box for its own errors), no traceback, and nothing written or deleted in the working directory.

Most cases run in-process (Typer's test runner); a few run the installed ``dpaudit`` executable.
Commands that could start a run also get an unreachable ``--scheduler`` when the case is not about
the cluster: a check that let the input through would then fail fast on the scheduler instead of
running (and outputs are checked before the cluster, so the case's own error comes first).
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli.app import app
from tests._ceilings import PROCESS_CEILING_S
from tests.integration._specs import tiny_spec, to_toml

#: cases whose fix lands with another part of the code (strict: they fail until it lands; then
#: remove them from here)
PENDING = {}

runner = CliRunner()


@dataclass
class Ctx:
    """What a case's arguments may point at (all made before the tree is snapshot)."""

    work: Path  # the working directory: nothing in it may change
    ro: Path  # a directory that cannot be written, even by root
    closed: str  # a Dask scheduler address where nothing listens


def tree(root: Path) -> dict[str, object]:
    """Every path under ``root`` with its kind and, for files, its bytes (a FIFO, a socket or a
    device: its kind and inode, never read)."""
    out: dict[str, object] = {}
    for p in sorted(root.rglob("*")):
        key = str(p.relative_to(root))
        if p.is_symlink():
            out[key] = ("link", os.readlink(p))
        elif p.is_dir():
            out[key] = "dir"
        elif p.is_file():
            out[key] = p.read_bytes()
        else:
            st = p.lstat()
            out[key] = ("special", stat.S_IFMT(st.st_mode), st.st_ino)
    return out


def writable(d: Path) -> bool:
    try:
        probe = d / ".probe"
        probe.write_text("x")
        probe.unlink()
        return True
    except OSError:
        return False


@pytest.fixture
def ro_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory no one can write: mode 0555 (enough for a user); for root, which ignores
    permission bits, also immutable (chattr +i); failing both, sysfs (no files can be created)."""
    d = tmp_path / "work" / "ro"
    d.mkdir(parents=True)
    (d / "keep.txt").write_text("kept")
    d.chmod(0o555)
    if writable(d):
        subprocess.run(["chattr", "+i", str(d)], capture_output=True, check=False)
    try:
        yield d if not writable(d) else Path("/sys")  # kernel interface: never writable
    finally:
        subprocess.run(["chattr", "-i", str(d)], capture_output=True, check=False)
        d.chmod(0o755)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


SPECS = {
    "malformed": "[audit\nname = 1\n",
    "unknown-key": "[audit]\nreplicats = 3\n",
    "unknown-geolevel": "[mpl]\nenabled = true\ngeolevels = ['Tracts']\n",
    "negative-replicates": "[audit]\nreplicates = -1\n",
    "delta-0": "[accounting]\ndeltas = [0.0]\n",
    "delta-1": "[accounting]\ndeltas = [1.0]\n",
    "delta-neg": "[accounting]\ndeltas = [-1.0]\n",
    "delta-nan": "[accounting]\ndeltas = [nan]\n",
    "delta-inf": "[accounting]\ndeltas = [inf]\n",
    "nul": '[audit]\nname = "a\x00b"\n',
    "unknown-allocation": "[audit]\nallocation = 'nope'\n",
    "class-missing": "[cluster]\nclass = 'nosuchmodule.Cluster'\n",
    "class-kwargs": "[cluster]\nclass = 'distributed.SpecCluster'\nkwargs = { bogus = 1 }\n",
    "queries-empty": "[simulation]\nqueries = []\n",
    "mpl-geolevels-empty": "[mpl]\nenabled = true\ngeolevels = []\n",
    "table-1e30": "[population]\nkind = 'table'\npath = 'counts.csv'\ncounts = ['total']\n"
    "[release]\nkind = 'gdpc'\n",
    "store-under-file": "[output]\nstore = 'afile/a.zarr'\n",
    "replicates-true": "[audit]\nreplicates = true\n",
    "replicates-str": '[audit]\nreplicates = "2"\n',
    "replicates-float": "[audit]\nreplicates = 2.0\n",
    "memory-negative": '[cluster]\nmemory_limit = "-4GiB"\n',
    "deep": "[audit]\nname = " + "[" * 3000 + "]" * 3000 + "\n",
    "good": to_toml(tiny_spec()),
    "alloc-nan": "[audit]\nallocation = '../alloc/nan.csv'\n",
    # production schemas: TopDown on the spine only, dense blocks small enough to write
    "prod-synthetic": "[population]\nattributes = 'dhc_production'\n[release]\nkind = 'topdown'\n",
    "prod-allocation": "[population]\nkind = 'flaxman'\nattributes = 'dhc_production'\n"
    "[release]\nkind = 'gdpc'\n",
    "prod-table": "[population]\nkind = 'table'\npath = 'counts.csv'\n"
    "attributes = 'pl94_production'\n[release]\nkind = 'topdown'\n",
    # a dense allocation release of the DHC's schema on a synthetic population: its Block level's
    # every cell (432 units x the cells of its queries, 1,227,744 of them the detailed query's)
    "prod-dense-too-large": "[audit]\nallocation = 'dhc_2023_production'\n[population]\n"
    "attributes = 'dhc_production'\n[release]\nkind = 'allocation'\n[simulation]\n"
    "max_cells_per_query = 2000000\n",
}
#: allocation files (work/alloc/NAME.csv): one good file mixing mechanisms, the rest bad
_AH = "geolevel,query,cells,mechanism,rho,sigma2,scale,neighbours\n"
ALLOCS = {
    "mixed": _AH + "State,total,1,geometric,,,2,add_remove\nState,sex,2,discrete_gaussian,,4,,"
    "add_remove\n",
    "laplace": _AH + "State,total,1,laplace,,,2,add_remove\n",
    "empty": "",
    "no-mechanism": "geolevel,query,rho\nState,total,1/2\n",
    "nan": _AH + "State,total,1,discrete_gaussian,NaN,,,\n",
    "negative": _AH + "State,total,1,discrete_gaussian,,-4,,bounded\n",
    "zero": _AH + "State,total,1,geometric,,,0,bounded\n",
    "mechanism": _AH + "State,total,1,poisson,1/2,,,\n",
    "relation": _AH + "State,total,1,discrete_gaussian,1/2,,,replace\n",
    "duplicate": _AH + "State,total,1,discrete_gaussian,1/2,,,\nState,total,1,discrete_gaussian,"
    "1/4,,,\n",
    "cells": _AH + "State,total,many,discrete_gaussian,1/2,,,\n",
    "sigma2-1e400": _AH + "State,total,1,discrete_gaussian,,1e400,,add_remove\n",
    "sigma2-1e-400": _AH + "State,total,1,discrete_gaussian,,1e-400,,add_remove\n",
    "sigma2-5e-324": _AH + "State,total,1,discrete_gaussian,,5e-324,,add_remove\n",
    "cells-superscript": _AH + "State,total,²,discrete_gaussian,1/2,,,\n",
    "long-field": _AH + "State,total,1,discrete_gaussian,1/2,,,," + "x" * 131_073 + "\n",
    "sensitivity-1e12": "geolevel,query,mechanism,sigma2,sensitivity,neighbours\n"
    "State,total,discrete_gaussian,4,1000000000000,add_remove\n",
}
BYTES = {
    "latin1": b'[audit]\nname = "caf\xe9"\n',  # Latin-1, not UTF-8: byte 19
    "binary": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",  # a PNG header
}


@pytest.fixture
def ctx(tmp_path: Path, ro_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Ctx:
    work = tmp_path / "work"
    specs = work / "specs"
    specs.mkdir(parents=True)
    for name, text in SPECS.items():
        (specs / f"{name}.toml").write_text(text, encoding="utf-8")
    for name, raw in BYTES.items():
        (specs / f"{name}.toml").write_bytes(raw)
    (specs / "counts.csv").write_text("total\n5\n1e30\n")
    (work / "alloc").mkdir()
    for name, text in ALLOCS.items():
        (work / "alloc" / f"{name}.csv").write_text(text, encoding="utf-8")
    (work / "alloc" / "deep.toml").write_text("neighbours = " + "[" * 3000 + "]" * 3000 + "\n")
    (work / "afile").write_text("a regular file\n")
    (work / "existing.html").write_text("<p>mine</p>")
    (work / "existing.csv").write_text("mine\n")
    store = work / "existing.zarr"  # a store a run wrote: refused without --overwrite
    store.mkdir()
    (store / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": {}}')
    plain = work / "plain"  # someone's directory, not a store
    plain.mkdir()
    (plain / "notes.txt").write_text("mine")
    monkeypatch.chdir(work)  # default outputs (results/..., report.html) land here
    # where a file or a store is due: a FIFO (opening it to write would block), a socket and a
    # link to a device (replacing it would replace the link; writing through it, the device)
    os.mkfifo("fifo")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("sock")  # relative: a socket path holds at most 107 bytes
    os.symlink("/dev/null", "devlink")
    # stores whose metadata documents are no regular files: a reader would block or never end
    for name in ("fifo.zarr", "zero.zarr", "node.zarr", "node.zarr/g"):
        (work / name).mkdir()
    os.mkfifo("fifo.zarr/zarr.json")
    os.symlink("/dev/zero", "zero.zarr/zarr.json")
    (work / "node.zarr" / "zarr.json").write_text((store / "zarr.json").read_text())
    os.mkfifo("node.zarr/g/zarr.json")
    monkeypatch.setenv("DPAUDIT_LOG_DIR", str(tmp_path / "logs"))
    # the test process's own Prefect/Dask records (its harness, earlier cases run in-process) go
    # to a process-wide log chosen once per process: kept apart from what a command leaves
    if "DPAUDIT_RUN_LOG" not in os.environ:
        os.environ["DPAUDIT_RUN_LOG"] = str(tmp_path.parent / "dpaudit-test-process.log")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    return Ctx(work=work, ro=ro_dir, closed=f"tcp://127.0.0.1:{closed_port()}")


Args = Callable[[Ctx], list[str]]


def S(name: str) -> str:
    return f"specs/{name}.toml"


def line(cid: str, args: Args, *patterns: str) -> object:
    """A case ending in one ``dpaudit: error:`` line with exit 2 that contains every pattern."""
    marks = [pytest.mark.xfail(strict=True, reason=PENDING[cid])] if cid in PENDING else []
    return pytest.param(args, "line", patterns, id=cid, marks=marks)


def usage(cid: str, args: Args, *patterns: str) -> object:
    """A case Typer refuses itself: one usage box, exit 2."""
    return pytest.param(args, "usage", patterns, id=cid)


def run_(*extra: str) -> Args:
    """``run`` with an unreachable scheduler as the safety net."""
    return lambda c: ["run", *[e.format(ro=c.ro) for e in extra], "--scheduler", c.closed]


CASES = [
    # run: the spec
    line("run-malformed-toml", run_(S("malformed")), "is not valid TOML"),
    line("run-unknown-key", run_(S("unknown-key")), "audit.replicats: unknown key"),
    line("run-unknown-geolevel", run_(S("unknown-geolevel")), "'Tracts'"),
    line("run-negative-replicates", run_(S("negative-replicates")), "audit.replicates = -1"),
    line("run-delta-0", run_(S("delta-0")), "accounting.deltas"),
    line("run-delta-1", run_(S("delta-1")), "accounting.deltas"),
    line("run-delta-negative", run_(S("delta-neg")), "accounting.deltas"),
    line(
        "run-production-synthetic",
        run_(S("prod-synthetic")),
        "'dhc_production' runs on the US spine's sparse histograms only",
        "population.kind = 'synthetic'",
    ),
    line(
        "run-production-allocation",
        run_(S("prod-allocation")),
        "release.kind = 'gdpc' does not use it",
    ),
    line(
        "run-production-table",
        run_(S("prod-table")),
        "population.kind = 'table'",
        'set population.kind = "spine"',
    ),
    line(
        "run-production-dense-too-large",
        run_(S("prod-dense-too-large")),
        "block ST01/Block holds 432 units",
        "GiB",
        "lower simulation.max_cells_per_query (now 2,000,000)",
    ),
    line("run-delta-nan", run_(S("delta-nan")), "accounting.deltas"),
    line("run-delta-inf", run_(S("delta-inf")), "accounting.deltas"),
    line("run-not-utf8", run_(S("latin1")), "not UTF-8", "byte 0xe9", "position 19"),
    line("run-binary-spec", run_(S("binary")), "not UTF-8", "byte 0x89", "position 0"),
    line("run-nul-in-spec", run_(S("nul")), "is not valid TOML"),
    line("run-unknown-allocation", run_(S("unknown-allocation")), "'nope'"),
    line("run-alloc-nan", run_(S("alloc-nan")), "nan.csv', line 2, column 'rho'"),
    line("run-class-not-importable", lambda c: ["run", S("class-missing")], "nosuchmodule"),
    line("run-class-bad-kwargs", lambda c: ["run", S("class-kwargs")], "bogus"),
    line("run-missing-spec", run_(S("none")), "spec file not found"),
    line("run-spec-is-a-directory", run_("specs"), "spec file not found"),
    line("run-queries-empty", run_(S("queries-empty")), "simulation.queries"),
    line("run-table-count-1e30", run_(S("table-1e30")), "Invalid count 1e+30"),
    line("run-mpl-geolevels-empty", run_(S("mpl-geolevels-empty")), "mpl.geolevels"),
    line("run-replicates-true", run_(S("replicates-true")), "replicates = True: must be an int"),
    line("run-replicates-str", run_(S("replicates-str")), "replicates = '2': must be an integer"),
    line("run-replicates-float", run_(S("replicates-float")), "replicates = 2.0: must be an int"),
    line("run-memory-negative", run_(S("memory-negative")), "'-4GiB': must be a positive size"),
    line("run-spec-nested-3000-deep", run_(S("deep")), "deep.toml' nests", "too deeply"),
    # run: the outputs (before the cluster)
    line("run-unreachable-scheduler", run_(S("good")), "is unreachable"),
    line("run-store-exists", run_(S("good"), "--store", "existing.zarr"), "not a dpaudit store"),
    line("run-store-under-file", run_(S("good"), "--store", "afile/a.zarr"), "is a file"),
    line("run-spec-store-under-file", run_(S("store-under-file")), "afile", "is a file"),
    line("run-store-read-only", run_(S("good"), "--store", "{ro}/a.zarr"), "cannot write"),
    line("run-store-is-a-file", run_(S("good"), "--store", "afile"), "is a file"),
    line("run-report-is-a-dir", run_(S("good"), "--report", "plain"), "is a directory"),
    line("run-report-exists", run_(S("good"), "--report", "existing.html"), "already exists"),
    line("run-report-under-file", run_(S("good"), "--report", "afile/r.html"), "is a file"),
    line("run-report-read-only", run_(S("good"), "--report", "{ro}/r.html"), "cannot write"),
    line(
        "run-overwrite-non-store",
        run_(S("good"), "--store", "plain", "--overwrite"),
        "plain",
        "store",
    ),
    usage("run-unknown-option", lambda c: ["run", "--nosuch"], "--nosuch"),
    # run: outputs that are no regular file, even with --overwrite
    *(
        line(
            f"run-report-{name}",
            run_(S("good"), "--report", name, "--overwrite"),
            f"report '{name}' is a {what}",
            "not a regular file",
        )
        for name, what in (("fifo", "FIFO"), ("sock", "socket"), ("devlink", "character device"))
    ),
    line("run-report-dev-null", run_(S("good"), "--report", "/dev/null"), "character device"),
    line("run-store-fifo", run_(S("good"), "--store", "fifo", "--overwrite"), "is a FIFO"),
    line("run-store-dev-null", run_(S("good"), "--store", "/dev/null", "--overwrite"), "device"),
    # spec
    line("spec-malformed", lambda c: ["spec", S("malformed")], "is not valid TOML"),
    line("spec-not-utf8", lambda c: ["spec", S("latin1")], "not UTF-8", "position 19"),
    line("spec-unknown-key", lambda c: ["spec", S("unknown-key")], "replicats"),
    line("spec-missing", lambda c: ["spec", S("none")], "spec file not found"),
    # verify
    line("verify-missing", lambda c: ["verify", "nothere.zarr"], "not found"),
    line("verify-plain-dir", lambda c: ["verify", "plain"], "not a result store"),
    line("verify-a-file", lambda c: ["verify", "afile"], "is a file"),
    # report
    line("report-missing-store", lambda c: ["report", "nothere.zarr"], "not found"),
    line("report-plain-dir", lambda c: ["report", "plain", "-o", "r.html"], "not a result store"),
    line("report-incomplete", lambda c: ["report", "existing.zarr", "-o", "r.html"], "completed"),
    line("report-o-dir", lambda c: ["report", "existing.zarr", "-o", "plain"], "is a directory"),
    line(
        "report-o-exists",
        lambda c: ["report", "existing.zarr", "-o", "existing.html"],
        "already exists",
        "--overwrite",
    ),
    line(
        "report-o-missing-parent",
        lambda c: ["report", "x.zarr", "-o", "no/r.html"],
        "directory",
        "not found",
    ),
    line("report-o-parent-file", lambda c: ["report", "x.zarr", "-o", "afile/r.html"], "is a file"),
    line(
        "report-o-read-only", lambda c: ["report", "x.zarr", "-o", f"{c.ro}/r.html"], "cannot write"
    ),
    *(
        line(
            f"report-o-{name.strip('/').replace('/', '-')}",
            lambda c, name=name: ["report", "x.zarr", "-o", name, "--overwrite"],
            f"report '{name}' is a {what}",
            "not a regular file",
        )
        for name, what in (
            ("fifo", "FIFO"),
            ("sock", "socket"),
            ("devlink", "character device"),
            ("/dev/null", "character device"),
        )
    ),
    # compare: its output before its stores
    line(
        "compare-o-fifo",
        lambda c: ["compare", "x.zarr", "y.zarr", "-o", "fifo", "--overwrite"],
        "output 'fifo' is a FIFO",
    ),
    line(
        "compare-o-dir", lambda c: ["compare", "x.zarr", "y.zarr", "-o", "plain"], "is a directory"
    ),
    # serve (PREFECT_API_URL unset)
    line("serve-no-server", lambda c: ["serve"], "needs a Prefect server"),
    # sweep
    line("sweep-unknown-allocation", lambda c: ["sweep", "-a", "nope"], "'nope'"),
    line("sweep-delta-0", lambda c: ["sweep", "-d", "0"], "Invalid delta"),
    line("sweep-delta-nan", lambda c: ["sweep", "-d", "nan"], "Invalid delta"),
    line("sweep-points", lambda c: ["sweep", "--points", "5"], "Invalid --points"),
    line(
        "sweep-store-under-file",
        lambda c: ["sweep", "--store", "afile/s.zarr", "--scheduler", c.closed],
        "is a file",
    ),
    line(
        "sweep-store-exists",
        lambda c: ["sweep", "--store", "existing.zarr", "--scheduler", c.closed],
        "not a dpaudit store",
    ),
    line("sweep-unreachable", lambda c: ["sweep", "--scheduler", c.closed], "is unreachable"),
    line(
        "sweep-store-socket",
        lambda c: ["sweep", "--store", "sock", "--overwrite", "--scheduler", c.closed],
        "'sock' is a socket",
    ),
    usage("sweep-neighbours-both", lambda c: ["sweep", "-n", "both"], "both"),
    usage("sweep-delta-abc", lambda c: ["sweep", "--delta", "abc"], "--delta"),
    # mpl-coverage
    line("mpl-unknown-mechanism", lambda c: ["mpl-coverage", "-m", "foo"], "Unknown mechanism"),
    line("mpl-epsilon-0", lambda c: ["mpl-coverage", "-e", "0"], "Invalid epsilon"),
    line("mpl-epsilon-negative", lambda c: ["mpl-coverage", "-e", "-1"], "Invalid epsilon"),
    line("mpl-alpha", lambda c: ["mpl-coverage", "--alpha", "1.5"], "Invalid alpha"),
    line("mpl-reps-0", lambda c: ["mpl-coverage", "--reps", "0"], "Invalid repetitions: 0"),
    line("mpl-reps-huge", lambda c: ["mpl-coverage", "--reps", "1000000000"], "MAX_REPETITIONS"),
    line("calibrate-target-tiny", lambda c: ["calibrate", "--target", "1e-300"], "smallest target"),
    line("direct-mean-tiny", lambda c: ["direct", "--mean", "1e-300"], "Invalid mu"),
    line("direct-people-huge", lambda c: ["direct", "--people", "1000000000000"], "MAX_PEOPLE"),
    line("direct-reps-huge", lambda c: ["direct", "--reps", "100000000"], "MAX_REPLICATES"),
    line("mpl-twice", lambda c: ["mpl-coverage", "-m", "laplace", "-m", "laplace"], "twice"),
    line(
        "mpl-store-read-only",
        lambda c: ["mpl-coverage", "--store", f"{c.ro}/m.zarr", "--scheduler", c.closed],
        "cannot write",
    ),
    line("mpl-unreachable", lambda c: ["mpl-coverage", "--scheduler", c.closed], "is unreachable"),
    # fdp-coverage
    line("fdp-unknown-mechanism", lambda c: ["fdp-coverage", "-m", "foo"], "Unknown mechanism"),
    line("fdp-parameter-0", lambda c: ["fdp-coverage", "-p", "0"], "Invalid parameter: 0.0"),
    line("fdp-parameter-nan", lambda c: ["fdp-coverage", "-p", "nan"], "Invalid parameter: nan"),
    line("fdp-conf", lambda c: ["fdp-coverage", "--conf", "1.5"], "Invalid conf"),
    line("fdp-reps-0", lambda c: ["fdp-coverage", "--reps", "0"], "Invalid --reps: 0"),
    line("fdp-reps-huge", lambda c: ["fdp-coverage", "--reps", "1000000000"], "1..100000"),
    line("fdp-n-0", lambda c: ["fdp-coverage", "--n", "0"], "Invalid --n: 0"),
    line("fdp-n-select-huge", lambda c: ["fdp-coverage", "--n-select", "10000000000"], "largest"),
    line("fdp-tests-0", lambda c: ["fdp-coverage", "--tests", "0"], "Invalid tests: 0"),
    line("fdp-twice", lambda c: ["fdp-coverage", "-p", "1", "-p", "1.0"], "given twice"),
    line(
        "fdp-store-read-only",
        lambda c: ["fdp-coverage", "--store", f"{c.ro}/f.zarr", "--scheduler", c.closed],
        "cannot write",
    ),
    line("fdp-unreachable", lambda c: ["fdp-coverage", "--scheduler", c.closed], "is unreachable"),
    # direct
    line("direct-algorithm", lambda c: ["direct", "--algorithm", "foo"], "Invalid --algorithm"),
    line("direct-epsilon-0", lambda c: ["direct", "--epsilon", "0"], "Invalid --epsilon"),
    line("direct-reps-negative", lambda c: ["direct", "--reps", "-1"], "Invalid sizes"),
    line("direct-confidence", lambda c: ["direct", "--confidence", "1.5"], "--confidence"),
    line("direct-leaf", lambda c: ["direct", "--to-leaf", "1000000000"], "Invalid --to-leaf"),
    line("direct-spec-not-utf8", lambda c: ["direct", "--spec", S("latin1")], "not UTF-8"),
    line("direct-spec-malformed", lambda c: ["direct", "--spec", S("malformed")], "valid TOML"),
    line("direct-spec-missing", lambda c: ["direct", "--spec", S("none")], "not found"),
    line(
        "direct-spec-mixed", lambda c: ["direct", "--spec", S("good"), "--people", "10"], "--people"
    ),
    line("direct-state-needs-spec", lambda c: ["direct", "--state", "ST01"], "needs --spec"),
    line(
        "direct-store-under-file",
        lambda c: ["direct", "--store", "afile/d.zarr", "--scheduler", c.closed],
        "is a file",
    ),
    # account
    line("account-delta-2", lambda c: ["account", "-d", "2"], "Invalid delta: 2.0"),
    line("account-delta-0", lambda c: ["account", "-d", "0"], "Invalid delta: 0.0"),
    line("account-delta-negative", lambda c: ["account", "-d", "-1"], "Invalid delta: -1.0"),
    line("account-delta-nan", lambda c: ["account", "-d", "nan"], "Invalid delta: nan"),
    line("account-delta-inf", lambda c: ["account", "-d", "inf"], "Invalid delta: inf"),
    line("account-unknown-allocation", lambda c: ["account", "-a", "nope"], "'nope'"),
    line("account-unknown-level", lambda c: ["account", "-l", "Tract"], "'Tract'"),
    line("account-epsilon-negative", lambda c: ["account", "-e", "-1"], "Invalid epsilon"),
    line("account-split-grid", lambda c: ["account", "--split-grid", "0.3"], "--split-grid"),
    line("account-max-work-negative", lambda c: ["account", "--max-work", "-5"], "--max-work"),
    line(
        "account-max-work-1e300",
        lambda c: ["account", "-l", "State", "-d", "1e-10", "--max-work", "1e300"],
        "max",
    ),
    usage("account-neighbours-both", lambda c: ["account", "-n", "both"], "both"),
    usage("account-method-foo", lambda c: ["account", "-m", "foo"], "foo"),
    usage("account-delta-abc", lambda c: ["account", "--delta", "abc"], "--delta"),
    # account: allocation files (a bad file names its line and column)
    line("account-alloc-empty", lambda c: ["account", "-a", "alloc/empty.csv"], "line 1", "empty"),
    line(
        "account-alloc-no-mechanism",
        lambda c: ["account", "-a", "alloc/no-mechanism.csv"],
        "line 1, column 'mechanism'",
        "missing column",
    ),
    line(
        "account-alloc-nan",
        lambda c: ["account", "-a", "alloc/nan.csv"],
        "line 2, column 'rho'",
        "not finite",
    ),
    line(
        "account-alloc-negative",
        lambda c: ["account", "-a", "alloc/negative.csv", "-n", "bounded"],
        "line 2, column 'sigma2'",
        "'-4' must be > 0",
    ),
    line(
        "account-alloc-zero",
        lambda c: ["account", "-a", "alloc/zero.csv", "-n", "bounded"],
        "line 2, column 'scale'",
        "'0' must be > 0",
    ),
    line(
        "account-alloc-mechanism",
        lambda c: ["account", "-a", "alloc/mechanism.csv"],
        "line 2, column 'mechanism'",
        "'poisson'",
    ),
    line(
        "account-alloc-relation",
        lambda c: ["account", "-a", "alloc/relation.csv"],
        "line 2, column 'neighbours'",
        "'replace'",
    ),
    line(
        "account-alloc-duplicate",
        lambda c: ["account", "-a", "alloc/duplicate.csv"],
        "line 3, column 'query'",
        "first on line 2",
    ),
    line(
        "account-alloc-cells",
        lambda c: ["account", "-a", "alloc/cells.csv"],
        "line 2, column 'cells'",
        "'many'",
    ),
    line("account-alloc-missing", lambda c: ["account", "-a", "alloc/none.csv"], "existing file"),
    *(
        line(
            f"account-alloc-{name}",
            lambda c, name=name: ["account", "-a", f"alloc/{name}.csv"],
            "line 2, column 'sigma2'",
            "is outside [1e-12, 1e12]",
        )
        for name in ("sigma2-1e400", "sigma2-1e-400", "sigma2-5e-324")
    ),
    line(
        "account-alloc-cells-superscript",
        lambda c: ["account", "-a", "alloc/cells-superscript.csv"],
        "line 2, column 'cells'",
        "'²' is not a positive integer",
    ),
    line(
        "account-alloc-long-field",
        lambda c: ["account", "-a", "alloc/long-field.csv"],
        "line 2",
        "131,072 characters",
    ),
    line(
        "account-alloc-sensitivity-1e12",
        lambda c: ["account", "-a", "alloc/sensitivity-1e12.csv"],
        "line 2, column 'sensitivity'",
        "MAX_SENSITIVITY = 2,097,152",
    ),
    line(
        "account-alloc-toml-3000-deep",
        lambda c: ["account", "-a", "alloc/deep.toml"],
        "deep.toml', TOML",
        "nested too deeply",
    ),
    line(
        "account-alloc-other-relation",
        lambda c: ["account", "-a", "alloc/mixed.csv", "-n", "bounded"],
        "--neighbours add_remove",
    ),
    # allocation export
    line("allocation-export-unknown", lambda c: ["allocation", "export", "nope"], "'nope'"),
    line(
        "allocation-export-o-exists",
        lambda c: ["allocation", "export", "pl94_2021_production", "-o", "existing.csv"],
        "already exists",
    ),
    line(
        "allocation-export-o-read-only",
        lambda c: ["allocation", "export", "pl94_2021_production", "-o", f"{c.ro}/a.csv"],
        "cannot write",
    ),
    line(
        "allocation-export-o-fifo",
        lambda c: ["allocation", "export", "pl94_2021_production", "-o", "fifo", "--overwrite"],
        "'fifo' is a FIFO",
    ),
    # calibrate
    line("calibrate-delta-0", lambda c: ["calibrate", "-d", "0"], "Invalid delta"),
    line("calibrate-target-word", lambda c: ["calibrate", "--target", "foo"], "Invalid target"),
    line("calibrate-target-negative", lambda c: ["calibrate", "--target", "-3"], "Invalid target"),
    line("calibrate-unknown-allocation", lambda c: ["calibrate", "-a", "nope"], "'nope'"),
    usage("calibrate-method-foo", lambda c: ["calibrate", "-m", "foo"], "foo"),
    line(
        "calibrate-alloc-nan",
        lambda c: ["calibrate", "-a", "alloc/nan.csv"],
        "line 2, column 'rho'",
    ),
    line(
        "calibrate-alloc-paper-bound-mixed",
        lambda c: ["calibrate", "-a", "alloc/mixed.csv", "-m", "paper-bound"],
        "mixes mechanisms",
    ),
    # tradeoff
    line("tradeoff-alpha", lambda c: ["tradeoff", "--alpha", "1.5"], "Invalid alpha: 1.5"),
    line("tradeoff-points-1", lambda c: ["tradeoff", "--points", "1"], "Invalid points: 1"),
    line("tradeoff-points-1e9", lambda c: ["tradeoff", "--points", "1000000000"], "Invalid points"),
    line("tradeoff-unknown-level", lambda c: ["tradeoff", "-l", "Tract"], "'Tract'"),
    line("tradeoff-o-dir", lambda c: ["tradeoff", "-o", "plain"], "is a directory"),
    line(
        "tradeoff-o-missing-parent", lambda c: ["tradeoff", "-o", "no/c.csv"], "directory", "found"
    ),
    line("tradeoff-o-parent-file", lambda c: ["tradeoff", "-o", "afile/c.csv"], "is a file"),
    line("tradeoff-o-read-only", lambda c: ["tradeoff", "-o", f"{c.ro}/c.csv"], "cannot write"),
    line("tradeoff-o-exists", lambda c: ["tradeoff", "-o", "existing.csv"], "already exists"),
    *(
        line(
            f"tradeoff-o-{name}",
            lambda c, name=name: ["tradeoff", "-o", name, "--overwrite"],
            f"'{name}' is a {what}",
            "not a regular file",
        )
        for name, what in (("fifo", "FIFO"), ("sock", "socket"), ("devlink", "character device"))
    ),
    line("tradeoff-o-dev-null", lambda c: ["tradeoff", "-o", "/dev/null"], "character device"),
    usage("tradeoff-format-xml", lambda c: ["tradeoff", "--format", "xml"], "xml"),
    usage("tradeoff-points-word", lambda c: ["tradeoff", "--points", "1e9"], "--points"),
    # the app
    usage("unknown-command", lambda c: ["nosuch"], "nosuch"),
]


def check(code: int, stdout: str, stderr: str, kind: str, patterns: tuple[str, ...]) -> None:
    assert "Traceback" not in stdout + stderr, stderr
    assert code == 2, (code, stdout, stderr)
    if kind == "usage":
        assert "dpaudit: error:" not in stderr
        assert stderr.count("Usage: ") == 1 and stderr.count("Error: ") == 1, stderr
        text = " ".join(stderr.replace("│", " ").split())
    else:
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("dpaudit: error: "), stderr
        assert stdout == "", stdout
        text = lines[0]
    for p in patterns:
        assert p in text, (p, text)


@pytest.mark.parametrize(("args", "kind", "patterns"), CASES)
def test_bad_input(ctx: Ctx, args: Args, kind: str, patterns: tuple[str, ...]) -> None:
    before = tree(ctx.work)
    res = runner.invoke(app, args(ctx), env={"COLUMNS": "200"})
    check(res.exit_code, res.stdout, res.stderr, kind, patterns)
    assert tree(ctx.work) == before  # nothing written, nothing deleted
    logs = ctx.work.parent / "logs"
    assert not logs.exists() or not any(logs.iterdir())  # bad input leaves no log either


def test_enough_cases_across_every_command() -> None:
    commands = {p.id.split("-")[0] for p in CASES}  # type: ignore[attr-defined]
    assert len(CASES) >= 60
    expected = {"run", "spec", "verify", "report", "serve", "sweep", "mpl", "direct"}
    assert expected | {"account", "calibrate", "tradeoff"} <= commands


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """PREFECT_API_URL at a socket that accepts connections: the server ``serve`` needs is
    reachable, so its later checks decide (none of these cases gets as far as talking to it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{sock.getsockname()[1]}/api")
        yield


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["serve", "--cron", "61 3 * * *"], "61 3 * * *"),
        (["serve", "--timezone", "Mars/Olympus"], "Mars/Olympus"),
        (["serve", S("malformed")], "is not valid TOML"),
        (["serve", S("latin1")], "not UTF-8"),
        (["serve", S("store-under-file")], "is a file"),
    ],
    ids=["serve-cron", "serve-timezone", "serve-malformed", "serve-not-utf8", "serve-store-file"],
)
def test_serve_bad_input(ctx: Ctx, fake_api: None, args: list[str], pattern: str) -> None:
    before = tree(ctx.work)
    res = runner.invoke(app, args)
    check(res.exit_code, res.stdout, res.stderr, "line", (pattern,))
    assert tree(ctx.work) == before


def test_serve_with_an_unreachable_server(ctx: Ctx, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{closed_port()}/api")
    res = runner.invoke(app, ["serve"])
    check(res.exit_code, res.stdout, res.stderr, "line", ("is unreachable",))


def dpaudit() -> list[str]:
    exe = Path(sys.executable).with_name("dpaudit")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "flows.cli"]


@pytest.mark.parametrize(
    ("args", "kind", "pattern"),
    [
        pytest.param(["run", S("latin1")], "line", "position 19", id="exe-run-not-utf8"),
        pytest.param(
            ["tradeoff", "-o", "{ro}/c.csv"], "line", "cannot write", id="exe-tradeoff-ro"
        ),
        pytest.param(["account", "-d", "nan"], "line", "Invalid delta", id="exe-account-nan"),
        pytest.param(["sweep", "-n", "both"], "usage", "both", id="exe-usage"),
        pytest.param(
            ["run", S("table-1e30"), "--scheduler", "{closed}"],
            "line",
            "count",
            id="exe-run-table-count-1e30",
        ),
        # metadata documents that would block or never end: refused unread, by every reader
        *(
            pytest.param(
                args,
                "line",
                f"metadata document '{doc}' is a {what}",
                id=f"exe-{args[0]}-{doc.split('.')[0]}-document",
            )
            for args, doc, what in (
                (["verify", "fifo.zarr"], "fifo.zarr/zarr.json", "FIFO"),
                (["verify", "zero.zarr"], "zero.zarr/zarr.json", "character device"),
                (["verify", "node.zarr"], "node.zarr/g/zarr.json", "FIFO"),
                (["report", "node.zarr", "-o", "r.html"], "node.zarr/g/zarr.json", "FIFO"),
                (["compare", "zero.zarr", "fifo.zarr"], "zero.zarr/zarr.json", "character"),
                (
                    [
                        "run",
                        S("good"),
                        "--store",
                        "fifo.zarr",
                        "--overwrite",
                        "--scheduler",
                        "{closed}",
                    ],
                    "fifo.zarr/zarr.json",
                    "FIFO",
                ),
            )
        ),
    ],
)
def test_bad_input_to_the_installed_command(
    ctx: Ctx, args: list[str], kind: str, pattern: str
) -> None:
    """The real executable: nothing but the one line (or box) reaches the terminal."""
    argv = [a.format(ro=ctx.ro, closed=ctx.closed) for a in args]
    before = tree(ctx.work)
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [*dpaudit(), *argv],
        cwd=ctx.work,
        env=env,
        capture_output=True,
        text=True,
        timeout=PROCESS_CEILING_S,
    )
    check(done.returncode, done.stdout, done.stderr, kind, (pattern,))
    if kind == "line":
        assert "unreachable" not in done.stderr  # the case's own error, not the safety net
    assert tree(ctx.work) == before


@pytest.fixture
def http_server() -> Iterator[str]:
    """An HTTP server on 127.0.0.1: it accepts TCP connections but does not speak Dask."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_scheduler_that_is_not_dask(prefect_harness: None, ctx: Ctx, http_server: str) -> None:
    """``--scheduler`` at a port that answers but is no Dask scheduler: refused in seconds as bad
    input within the connect timeout (10 s; the test gives the whole command 120 s, a ceiling for a
    busy machine: without the check it waits for ever)."""
    from prefect.settings import PREFECT_API_URL

    before = tree(ctx.work)
    cmd = [*dpaudit(), "run", S("good"), "--store", "a.zarr", "--scheduler", http_server]
    env = {
        **os.environ,
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "5s",
    }
    proc = subprocess.Popen(
        cmd, cwd=ctx.work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=PROCESS_CEILING_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("dpaudit run still waits for a scheduler that is an HTTP server after 120 s")
    check(proc.returncode, stdout, stderr, "line", ("scheduler",))
    assert tree(ctx.work) == before
