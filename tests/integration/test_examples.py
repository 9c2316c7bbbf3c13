"""Every example runs as its docstring says: the commands are read from the examples themselves
(each ``python examples/…`` line of a script's docstring; the ``dpaudit …`` line of
``examples/country/audit.toml``'s comment) and run as written (tests/integration/_examples.py).
Each must exit 0 and print what it promises; a dpaudit run's store must hold what its spec declares
(the clients' allocation file: the claimed mechanism's exact ε).

``examples/clients.py --mechanism tumult-count`` (which runs ``examples/tumult_client.py`` with
Tumult's own interpreter) is run the same way by tests/integration/test_tumult_client.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration._examples import (
    EXAMPLES,
    comment_commands,
    copy_examples,
    docstring_commands,
    documented_env,
    epsilon_declared,
    run_as_documented,
)

pytestmark = pytest.mark.integration

#: run by tests/integration/test_tumult_client.py (it needs Tumult's own environment)
TUMULT = "--mechanism tumult-count"


def example_commands() -> list[tuple[str, str]]:
    """(directory relative to the root, command) of every example."""
    found = [
        (".", cmd)
        for path in sorted(EXAMPLES.glob("*.py"))
        for cmd in docstring_commands(path)
        if TUMULT not in cmd
    ]
    found += [
        ("examples/country", cmd) for cmd in comment_commands(EXAMPLES / "country/audit.toml")
    ]
    return found


def check_midwest(out: str, root: Path) -> None:
    assert "437 counties, 42,008,942 people" in out
    assert re.search(r"GDPC \d\.\d+\s+ADPC \(P = 4\) \d\.\d+", out), out
    assert "SA3: EPL / epsilon" in out and "SA4: EPL / epsilon" in out


def check_stratified(out: str, root: Path) -> None:
    assert out.startswith("2663 districts")
    assert "SA3 (eps 0.25 + 0.75): EPL strata" in out
    assert "SA4 (eps 0.25, county totals invariant): EPL strata" in out


def _clients_store(out: str, root: Path, line: str) -> re.Match[str]:
    got = re.search(line, out)
    assert got, out
    spec = root / "results/clients/observed.toml"
    assert spec.is_file() and (root / "results/clients/report.html").is_file()
    return got


def check_clients_default(out: str, root: Path) -> None:
    # OpenDP's count at ε = 1, declared as a geometric of scale 1: the store's exact ε is 1
    assert "opendp-count: the library claims {'epsilon': 1.0}" in out
    _clients_store(out, root, r"EPL at county level: \d\.\d+ \[\d\.\d+, \d\.\d+\]")
    # declared truly: the claim verdict reads consistent (a false refutation: at most α = 0.05)
    assert "claim verdict at County: consistent" in out, out
    text = (root / "results/clients/allocation.csv").read_text()
    assert text.splitlines()[1] == "County,total,1,geometric,1,add_remove", text
    eps = epsilon_declared(root / "results/clients/audit.zarr", "County", 1e-10)
    assert eps == pytest.approx(1.0, rel=1e-6)


def check_clients_claim(out: str, root: Path) -> None:
    # diffprivlib's Laplace at ε = 1 (seeded), claimed at 0.5: declared as a Laplace of scale 2,
    # whose exact ε is the claim; the claim verdict refutes it and the MPL bound lies above it
    assert "checked claim: epsilon = 0.5" in out
    assert re.search(r"MPL lower bound \(99\.9 %\): \d\.\d+ -> FLAGGED", out), out
    _clients_store(out, root, r"claim verdict at County: refuted")
    text = (root / "results/clients/allocation.csv").read_text()
    assert text.splitlines()[1] == "County,total,1,laplace,2,add_remove", text
    eps = epsilon_declared(root / "results/clients/audit.zarr", "County", 1e-10)
    assert eps == pytest.approx(0.5, rel=1e-6)


def check_country(out: str, root: Path) -> None:
    assert re.search(r"run [0-9a-f]+: 4 blocks", out), out
    store = root / "examples/country/results/audit.zarr"
    assert store.is_dir() and (root / "examples/country/results/report.html").is_file()
    import xarray as xr

    res = xr.open_zarr(store, group="residuals")
    assert res.sizes["replicate"] == 8  # replicates = 8, as the spec says
    acc = xr.open_zarr(store, group="accounting")
    assert list(acc.geolevel.values) == ["All", "region", "district", "village"]


#: what each documented command must print and leave behind
CHECKS: dict[str, Callable[[str, Path], None]] = {
    "python examples/midwest.py": check_midwest,
    "python examples/midwest.py --epsilon 1.0": check_midwest,
    "python examples/stratified_sa3_sa4.py": check_stratified,
    "python examples/clients.py": check_clients_default,
    "python examples/clients.py --mechanism diffprivlib-laplace --claim 0.5": check_clients_claim,
    "dpaudit run audit.toml": check_country,
}
#: modules clients.py runs or imports, checked through its documented commands: Tumult's client
#: (run by Tumult's own interpreter), its host side, and the library's audit
CLIENTS_PARTS = ("tumult_client.py", "tumult_host.py", "library_audit.py")
#: the documented runs that are dpaudit runs (on the session's Prefect API)
FLOWS = ("python examples/clients.py", "dpaudit run")


def test_every_example_documents_its_commands_and_each_is_checked() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*.py")}
    documented = {
        p.name for p in EXAMPLES.glob("*.py") if docstring_commands(p) or p.name in CLIENTS_PARTS
    }
    assert documented == scripts  # the parts of clients.py run through its commands
    assert any(TUMULT in c for c in docstring_commands(EXAMPLES / "clients.py"))
    assert sorted(cmd for _, cmd in example_commands()) == sorted(CHECKS)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("where", "command"),
    [pytest.param(where, cmd, id=cmd) for where, cmd in example_commands()],
)
def test_example_runs_as_documented(
    request: pytest.FixtureRequest, tmp_path: Path, where: str, command: str
) -> None:
    flows = command.startswith(FLOWS)
    if flows:
        request.getfixturevalue("prefect_harness")
    root = tmp_path / "root"
    copy_examples(root)
    env = documented_env(tmp_path / "logs", api=flows)
    done = run_as_documented(where, command, root, env)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    CHECKS[command](done.stdout, root)
