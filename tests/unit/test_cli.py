"""The command line: bad input exits 2 with one line naming the problem, and writes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli.app import app

runner = CliRunner()


def write_spec(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "spec.toml"
    out = f'\n[output]\nstore = "{tmp_path / "out.zarr"}"\nreport = "{tmp_path / "r.html"}"\n'
    p.write_text(body + out)
    return p


@pytest.mark.parametrize(
    ("body", "pattern"),
    [
        ("[audit]\nreplicats = 3", "audit.replicats: unknown key"),
        ("[audit]\nreplicates = -1", "audit.replicates = -1"),
        ("[accounting]\ndeltas = [2.0]", "accounting.deltas = [2.0]"),
        (
            "[cluster]\nscheduler = 'tcp://127.0.0.1:1'",
            "Dask scheduler at 'tcp://127.0.0.1:1' is unreachable",
        ),
    ],
)
def test_run_rejects_bad_specs_with_exit_2_and_no_store(
    tmp_path: Path, body: str, pattern: str
) -> None:
    spec = write_spec(tmp_path, body)
    res = runner.invoke(app, ["run", str(spec)])
    assert res.exit_code == 2, res.output
    assert pattern in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.zarr").exists()
    assert not any(p.name.startswith(".out.zarr") for p in tmp_path.iterdir())


def test_run_refuses_to_replace_an_existing_store(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "")
    (tmp_path / "out.zarr").mkdir()
    (tmp_path / "out.zarr" / "keep.txt").write_text("mine")
    res = runner.invoke(app, ["run", str(spec)])
    assert res.exit_code == 2
    assert "is not a dpaudit store" in res.stderr  # --overwrite would not replace it either
    assert (tmp_path / "out.zarr" / "keep.txt").read_text() == "mine"


def test_missing_spec_file(tmp_path: Path) -> None:
    res = runner.invoke(app, ["run", str(tmp_path / "nope.toml")])
    assert res.exit_code == 2 and "spec file not found" in res.stderr


def test_account_json_reproduces_su_su_wang_state_level() -> None:
    # REFERENCE.md / Su, Su & Wang Table 1: State level, add/remove, delta = 1e-11:
    # exact eps 10.125417, Bureau's rho + 2 sqrt(rho ln 1/delta) = 11.066
    res = runner.invoke(
        app,
        [
            "account",
            "--allocation",
            "dhcp_20220825_paper",
            "--neighbours",
            "add_remove",
            "--delta",
            "1e-11",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    state = next(lv for lv in out["levels"] if lv["geolevel"] == "State")
    e = state["epsilon"][0]
    assert e["delta"] == 1e-11
    assert e["exact"] == pytest.approx(10.125417, abs=1e-4)
    assert e["exact_lower"] <= 10.125417 + 1e-6 and e["exact_upper"] >= 10.125417 - 1e-6
    assert e["bureau"] == pytest.approx(11.066, abs=5e-4)
    block = next(lv for lv in out["levels"] if lv["geolevel"] == "Block")
    assert block["epsilon"][0]["exact"] == pytest.approx(0.917830, abs=1e-4)


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["--delta", "2"], "Invalid delta: 2.0"),
        (["--delta", "0"], "Invalid delta: 0.0"),
        (["--level", "Tract"], "Unknown geolevel: 'Tract'"),
        (["--allocation", "nope"], "Unknown allocation: 'nope'"),
        (["--neighbours", "swap"], "swap"),
    ],
)
def test_account_bad_input_exit_2(args: list[str], pattern: str) -> None:
    res = runner.invoke(app, ["account", *args])
    assert res.exit_code == 2
    assert pattern in res.stderr


def test_version_and_spec_print() -> None:
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout.startswith("dpaudit ")
    res = runner.invoke(app, ["spec"])
    assert res.exit_code == 0 and "[audit]" in res.stdout


def test_console_script_exit_code(tmp_path: Path) -> None:
    """The installed entry point, as a user runs it: a typo'd spec exits 2."""
    spec = write_spec(tmp_path, "[audit]\nreplicats = 3")
    exe = Path(sys.executable).with_name("dpaudit")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "flows.cli"]
    out = subprocess.run([*cmd, "run", str(spec)], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().startswith("dpaudit: error:") and "replicats" in out.stderr


def test_report_of_a_missing_store(tmp_path: Path) -> None:
    res = runner.invoke(app, ["report", str(tmp_path / "none.zarr")])
    assert res.exit_code == 2 and "not found" in res.stderr


def test_run_refuses_a_store_another_run_is_writing(tmp_path: Path) -> None:

    spec = write_spec(tmp_path, "")
    code = (
        "import sys, time\nfrom storage import store\n"
        "with store.exclusive(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)\n"
    )
    live = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "out.zarr")],
        cwd=Path(__file__).parents[2],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert live.stdout is not None and live.stdout.readline().strip() == "held"
        res = runner.invoke(app, ["run", str(spec)])
    finally:
        live.kill()
        live.wait()
    assert res.exit_code == 2
    assert f"another dpaudit run (pid {live.pid}) is writing" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.zarr.lock", "spec.toml"]


def test_report_refuses_an_existing_file_unless_overwrite(tmp_path: Path) -> None:
    from tests.unit.test_store_integrity import built

    url = built(tmp_path)
    out = tmp_path / "r.html"
    out.write_text("mine")
    res = runner.invoke(app, ["report", url, "-o", str(out)])
    assert res.exit_code == 2, res.output
    assert "already exists; pass --overwrite" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert out.read_text() == "mine"
    res = runner.invoke(app, ["report", url, "-o", str(out), "--overwrite"])
    assert res.exit_code == 0, res.output
    assert out.read_text().lstrip().lower().startswith("<!doctype html")


def test_a_failure_midway_is_one_line_naming_a_log_with_the_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception no command expected (here a real overflow in the accountant for an absurd
    target) ends in one line and exit 1; the trace goes to the log file the line names."""
    logs = tmp_path / "logs"
    monkeypatch.setenv("DPAUDIT_LOG_DIR", str(logs))
    args = ["calibrate", "-l", "State", "--target", "1e300"]
    res = runner.invoke(app, args)
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert lines[0].startswith("dpaudit: error: dpaudit calibrate failed: OverflowError")
    (log,) = logs.iterdir()
    assert lines[0].endswith(f"the full log is in {log}")
    trace = log.read_text()
    assert "Traceback (most recent call last)" in trace and "OverflowError" in trace
    # --debug: the same trace on stderr, then the one line
    res = runner.invoke(app, ["--debug", *args])
    assert res.exit_code == 1
    assert "Traceback (most recent call last)" in res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith("dpaudit: error: dpaudit calibrate")
    assert res.stderr.strip().endswith("the trace is above")
    assert list(logs.iterdir()) == [log]  # no second log


def test_debug_shows_the_trace_of_bad_input(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "[audit]\nreplicats = 3")
    res = runner.invoke(app, ["run", str(spec)])
    assert "Traceback" not in res.stderr
    res = runner.invoke(app, ["--debug", "run", str(spec)])
    assert res.exit_code == 2
    assert "Traceback (most recent call last)" in res.stderr and "SpecError" in res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith("dpaudit: error: invalid spec")


def test_help_lists_run_first() -> None:
    res = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    listed = [
        ln.split()[0]
        for ln in res.stdout.split("Commands:")[1].splitlines()
        if ln.startswith("  ") and ln.strip()
    ]
    assert listed[:6] == ["run", "spec", "verify", "report", "compare", "serve"]
    assert set(listed) >= {"sweep", "mpl-coverage", "direct", "account", "calibrate", "tradeoff"}
    assert "fdp-coverage" in listed


def test_fdp_coverage_help_lists_the_catalogue() -> None:
    from auditlib.mpl.tradeoff_coverage import TRADEOFF_CATALOGUE
    from flows.cli.experiments import FDP_CATALOGUE_NAMES

    assert FDP_CATALOGUE_NAMES.split(", ") == list(TRADEOFF_CATALOGUE)
    out = runner.invoke(app, ["fdp-coverage", "--help"], env={"COLUMNS": "400"})
    assert out.exit_code == 0
    flat = " ".join(out.output.replace("│", " ").split())
    assert FDP_CATALOGUE_NAMES in flat


def _commands() -> list[list[str]]:
    from flows.cli.app import COMMANDS

    return [[name] for name, _ in COMMANDS] + [["allocation", "export"]]


@pytest.mark.parametrize("command", _commands(), ids=lambda c: " ".join(c))
def test_every_help_reads_well_at_80_columns(command: list[str]) -> None:
    """Each command's help within 80 columns, its options shown by name (no Python types such as
    <bool> or <list[float]>, no choice list broken mid-word), every option with its help text."""
    res = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert res.exit_code == 0, res.output
    text = res.stdout
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "<bool>" not in text and "<list[" not in text and "<str>" not in text
    options = text.split("Options:")[1].splitlines()
    for i, line in enumerate(options):
        if line.startswith("  -"):  # an option: its help on the line or the next, indented
            has_help = len(line.split("  ")) > 2 and line.split("  ")[-1].strip()
            following = options[i + 1] if i + 1 < len(options) else ""
            assert has_help or following.startswith(" " * 10), f"no help: {line!r}"


def test_account_help_lists_the_shipped_allocations() -> None:
    from auditlib.allocations import ALLOCATION_FILES

    res = runner.invoke(app, ["account", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    flat = " ".join(res.stdout.split())
    assert all(a in flat for a in ALLOCATION_FILES)


def test_direct_level_of_flaxmans_tree_by_name_or_index() -> None:
    """``direct --level``: Flaxman's tree takes its levels' names (L0..LJ, as the stores name them)
    or indices; a geolevel name is a spec's and is refused without one."""
    from auditlib.exceptions import InvalidParameterError
    from flows.cli.direct import flaxman_level

    assert [flaxman_level(t) for t in ("L0", "L3", "l2", "2")] == [0, 3, 2, 2]
    for bad in ("County", "L", "-1", "L1.5"):
        with pytest.raises(InvalidParameterError, match=f"Invalid --level: '{bad}'"):
            flaxman_level(bad)
