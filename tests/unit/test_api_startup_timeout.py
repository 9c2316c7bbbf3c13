"""The embedded Prefect API's start-up ceiling: Prefect's own setting for its ephemeral servers
(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS) is the one knob, a bad value one clear error."""

from __future__ import annotations

import pytest

from flows.runtime.cluster import (
    STARTUP_TIMEOUT_ENV,
    STARTUP_TIMEOUT_S,
    ClusterConfigError,
    startup_timeout_s,
)


def test_unset_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STARTUP_TIMEOUT_ENV, raising=False)
    assert startup_timeout_s() == STARTUP_TIMEOUT_S
    monkeypatch.setenv(STARTUP_TIMEOUT_ENV, " ")
    assert startup_timeout_s() == STARTUP_TIMEOUT_S


@pytest.mark.parametrize(("raw", "seconds"), [("600", 600.0), (" 30 ", 30.0)])
def test_the_environment_sets_it(monkeypatch: pytest.MonkeyPatch, raw: str, seconds: float) -> None:
    monkeypatch.setenv(STARTUP_TIMEOUT_ENV, raw)
    assert startup_timeout_s() == seconds


@pytest.mark.parametrize("raw", ["0", "-5", "ten", "nan", "inf", "7.5"])
def test_a_bad_value_names_itself_and_the_fix(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(STARTUP_TIMEOUT_ENV, raw)
    with pytest.raises(ClusterConfigError) as err:
        startup_timeout_s()
    text = str(err.value)
    assert f"{STARTUP_TIMEOUT_ENV}={raw!r}" in text
    assert "positive whole number" in text and "unset it" in text
