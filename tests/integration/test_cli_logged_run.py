"""`dpaudit run` and `dpaudit report` logged to a file (`> run.log 2>&1`, cron, CI): one plain line
per stage, in order, at most 80 columns, no progress-bar control characters."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests._ceilings import PROCESS_CEILING_S
from tests.integration._processes import own_environment
from tests.integration._specs import tiny_spec, to_toml
from tests.integration.test_cli_run import dpaudit

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STAMP = r"dpaudit: \d\d:\d\d:\d\d "
DURATION = r"\((?:\d+(?:\.\d)? s|\d+ min \d\d s)\)"


def logged(cmd: list[str], cwd: Path, env: dict[str, str], name: str) -> list[str]:
    """Run ``cmd`` as ``cmd > name 2>&1``; the file's lines (the command must succeed)."""
    log = cwd / name
    with log.open("wb") as out:
        done = subprocess.run(
            cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=PROCESS_CEILING_S
        )
    text = log.read_text()
    assert done.returncode == 0, text[-3000:]
    # plain text: no carriage return (a bar redrawing itself), no ANSI escape, 80 columns at most
    assert "\r" not in text and "\x1b" not in text, repr(text[-2000:])
    lines = text.splitlines()
    assert [line for line in lines if len(line) > 80] == []
    return lines


def in_order(lines: list[str], patterns: list[str]) -> list[int]:
    """The index of the line matching each of ``patterns``, each after the previous one's."""
    found, start = [], 0
    for pat in patterns:
        at = next((i for i in range(start, len(lines)) if re.fullmatch(pat, lines[i])), None)
        assert at is not None, (pat, lines)
        found.append(at)
        start = at + 1
    return found


def test_a_logged_run_prints_one_plain_line_per_stage(tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text(to_toml(tiny_spec()))
    (tmp_path / "out").mkdir()
    env = own_environment()
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    env["DPAUDIT_LOG_DIR"] = str(tmp_path / "logs")
    cmd = [*dpaudit(), "run", "tiny.toml", "--store", "out/a.zarr", "--report", "out/r.html"]
    lines = logged(cmd, tmp_path, env, "run.log")

    summary = next(i for i, line in enumerate(lines) if line.startswith("run "))
    blocks = re.match(r"run [0-9a-f]{16}: (\d+) blocks", lines[summary])
    assert blocks is not None, lines[summary]
    n = blocks.group(1)
    # before the summary: only stage lines (or their indented continuations), nothing that
    # Prefect, Dask or the workers print
    stages = lines[:summary]
    assert all(re.match(STAMP, s) or s.startswith(" " * 18) for s in stages), stages
    at = in_order(
        stages,
        [
            STAMP + r"spec loaded: tiny\.toml \(allocation, \d+ levels, 2 replicates\)",
            STAMP + r"Prefect API ready \(embedded, .+\)",
            STAMP + r"cluster started \(local, 2 workers\)",
            STAMP + rf"simulate: {n}/{n} blocks done {DURATION}",
            STAMP + rf"epl done {DURATION}",  # EPL waits for the simulation
            STAMP + rf"flow finished, cluster closed {DURATION}",
            STAMP + rf"store checksummed and published {DURATION}",
            STAMP + r"rendering the report of out/a\.zarr",
            STAMP + rf"report written: out/r\.html {DURATION}",
        ],
    )
    accounting = in_order(stages, [STAMP + rf"accounting done {DURATION}"])[0]
    assert at[2] < accounting < at[5]  # beside the simulation, inside the flow
    assert lines[-1] == "report: out/r.html"
    assert (tmp_path / "out" / "r.html").stat().st_size > 0

    # the standalone report says when it starts and ends, then where it is
    lines = logged(
        [*dpaudit(), "report", "out/a.zarr", "-o", "out/r2.html"], tmp_path, env, "r.log"
    )
    in_order(
        lines,
        [
            STAMP + r"rendering the report of out/a\.zarr",
            STAMP + rf"report written: out/r2\.html {DURATION}",
            r"report: out/r2\.html",
        ],
    )
    assert (tmp_path / "out" / "r2.html").stat().st_size > 0
