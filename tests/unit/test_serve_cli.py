"""`dpaudit serve` refuses what it cannot schedule, before registering anything."""

from __future__ import annotations

import socket
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from auditlib.exceptions import InvalidParameterError
from flows.audit.scheduled import check_cron, expand_placeholders
from flows.cli.app import app

runner = CliRunner()


def test_serve_needs_a_prefect_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    res = runner.invoke(app, ["serve", "--cron", "0 3 * * *"])
    assert res.exit_code == 2
    assert "needs a Prefect server" in res.output and "PREFECT_API_URL" in res.output


def test_serve_with_an_unreachable_server(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("PREFECT_API_URL", f"http://ops:hunter2@127.0.0.1:{port}/api")
    res = runner.invoke(app, ["serve"])
    assert res.exit_code == 2 and "is unreachable" in res.output
    assert "hunter2" not in res.output and f"http://***@127.0.0.1:{port}/api" in res.output


@pytest.mark.parametrize(
    ("cron", "tz"), [("0 3 * *", "UTC"), ("61 3 * * *", "UTC"), ("0 3 * * *", "Mars/Olympus")]
)
def test_bad_cron_or_timezone(cron: str, tz: str) -> None:
    with pytest.raises(InvalidParameterError) as err:
        check_cron(cron, tz)
    assert repr(cron) in str(err.value) and repr(tz) in str(err.value)


def test_good_cron() -> None:
    check_cron("0 3 * * *", "Europe/Berlin")
    check_cron("*/15 * * * 1-5", "UTC")


def test_placeholders() -> None:
    when = datetime(2027, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert expand_placeholders("r/a-{date}-{time}.zarr", when) == "r/a-20270102-030405.zarr"
    assert expand_placeholders("r/a.zarr", when) == "r/a.zarr"
    with pytest.raises(InvalidParameterError, match="unknown placeholder"):
        expand_placeholders("r/{run}.zarr", when)
