"""The stages of a run (flows/runtime/progress.py) and the plain lines a logged run prints of them
(flows/cli/console.py)."""

from __future__ import annotations

import re

import pytest

from flows.cli.console import WIDTH, StageLog, stage_lines
from flows.runtime import progress


def test_block_progress_announces_each_stage_once_when_its_last_task_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress, "POLL_S", 3600.0)  # no background read during the test
    stages: list[str] = []
    progress.listen(lambda d, t, w: None, stages.append)
    finished = iter([3, 5])  # blocks marked done, as successive reads of the store see them
    try:
        with progress.BlockProgress(
            lambda: next(finished), 5, 2, 3, {"epl": 2, "accounting": 1}
        ) as p:
            p.task_done(False, "accounting")
            p.task_done(True)
            p.task_done(True)
            p.task_done(False, "epl")
            p.task_done(False, "epl")
    finally:
        progress.listen(None)
    took = r"\((?:\d+(?:\.\d)? s|\d+ min \d\d s)\)"
    assert len(stages) == 3, stages
    assert re.fullmatch(rf"accounting done {took}", stages[0])
    assert re.fullmatch(rf"simulate: 5/5 blocks done {took}", stages[1])
    assert re.fullmatch(rf"epl done {took}", stages[2])


def test_a_run_with_nothing_left_to_simulate_says_so() -> None:
    stages: list[str] = []
    progress.listen(None, stages.append)
    try:
        with progress.BlockProgress(lambda: 0, 0, 0, 1, {"epl": 1}) as p:
            p.task_done(False, "epl")
    finally:
        progress.listen(None)
    assert stages[0].startswith("simulate: no block left")
    assert stages[1].startswith("epl done")


def test_a_plan_without_blocks_says_nothing_of_simulating() -> None:
    """A release that simulates nothing (error bars of a published table) is not "resumed"."""
    stages: list[str] = []
    progress.listen(None, stages.append)
    try:
        with progress.BlockProgress(lambda: 0, 0, 0, 1, {"published errors": 1}, 0) as p:
            p.task_done(False, "published errors")
    finally:
        progress.listen(None)
    assert not any(s.startswith("simulate") for s in stages), stages
    assert stages[0].startswith("published errors done")


def test_durations_read_in_seconds_then_minutes() -> None:
    assert [progress.seconds(t) for t in (0.04, 9.94, 12.4, 599.0, 725.0)] == [
        "0.0 s",
        "9.9 s",
        "12 s",
        "599 s",
        "12 min 05 s",
    ]


def test_a_long_stage_message_wraps_at_80_columns_under_its_stamp() -> None:
    path = "/".join(["results", "a-rather-long-directory-name" * 3, "report.html"])
    message = f"report written: {path} (9.8 s)"
    lines = stage_lines(message)
    assert len(lines) >= 2
    assert all(len(line) <= WIDTH for line in lines)
    stamp = re.match(r"dpaudit: \d\d:\d\d:\d\d ", lines[0])
    assert stamp is not None
    indent = " " * stamp.end()
    assert all(line.startswith(indent) and line[stamp.end()] != " " for line in lines[1:])
    # the message is all there, the path broken where the width forced it
    body = "".join(line[stamp.end() :] for line in lines)
    assert body.replace(" ", "") == message.replace(" ", "")
    assert stage_lines("epl done (3.1 s)")[0].endswith(" epl done (3.1 s)")


def test_held_stage_lines_wait_for_the_flow_and_bad_input_drops_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    kept = StageLog(held=True)
    kept.stage("spec loaded: tiny.toml")
    assert capsys.readouterr().out == ""
    kept.stage("cluster started (local, 2 workers, 1.0 s)")
    kept.release()
    kept.stage("epl done (2.0 s)")
    out = capsys.readouterr().out.splitlines()
    assert [line[18:] for line in out] == [
        "spec loaded: tiny.toml",
        "cluster started (local, 2 workers, 1.0 s)",
        "epl done (2.0 s)",
    ]
    dropped = StageLog(held=True)
    dropped.stage("spec loaded: tiny.toml")
    dropped.drop()
    dropped.release()
    assert capsys.readouterr().out == ""
