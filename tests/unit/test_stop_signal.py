"""A stop signal raises :class:`Stopped` inside ``stopping_on`` and is found behind the exceptions
it caused (flows/runtime/stop_signal.py). The whole run stopped with SIGTERM:
tests/integration/test_run_processes.py."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from prefect.exceptions import TerminationSignal

from flows.runtime.stop_signal import Stopped, signal_name, stop_signal, stopping_on


def test_sigterm_inside_the_block_raises_stopped_and_the_handler_is_put_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Stopped) as caught, stopping_on():
        os.kill(os.getpid(), signal.SIGTERM)
        threading.Event().wait(5)  # the handler runs at once: this wait is cut short
    assert caught.value.signum == signal.SIGTERM
    assert isinstance(caught.value, KeyboardInterrupt)  # stops whatever stops on Ctrl-C
    assert signal.getsignal(signal.SIGTERM) is before


def test_off_the_main_thread_it_changes_nothing() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def body() -> None:
        with stopping_on():
            seen.append(signal.getsignal(signal.SIGTERM))

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == [before]


def _raised_while_handling(first: BaseException, then: Exception) -> Exception:
    """``then`` raised while ``first`` was being handled (its ``__context__``)."""
    try:
        try:
            raise first
        except BaseException:
            raise then  # noqa: B904 (its __context__ is `first`, as in Prefect's crash report)
    except Exception as exc:
        return exc
    raise AssertionError("unreachable")


def test_the_signal_is_found_behind_the_failure_it_caused() -> None:
    # Prefect turns SIGTERM into TerminationSignal, then its crash report to a stopped API fails
    refused = _raised_while_handling(
        TerminationSignal(signal.SIGTERM), ConnectionRefusedError(111, "Connection refused")
    )
    assert stop_signal(refused) == signal.SIGTERM
    wrapped = RuntimeError("flow crashed")
    wrapped.__cause__ = refused
    assert stop_signal(wrapped) == signal.SIGTERM
    assert stop_signal(Stopped(signal.SIGTERM)) == signal.SIGTERM


def test_a_failure_without_a_signal_is_not_a_stop() -> None:
    refused = _raised_while_handling(ValueError("bad chunk"), ConnectionRefusedError(111, "x"))
    assert stop_signal(refused) is None
    assert stop_signal(KeyboardInterrupt()) is None  # Ctrl-C: "interrupted", no signal name
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__context__, b.__context__ = b, a  # a cycle ends the walk
    assert stop_signal(a) is None


def test_signal_names() -> None:
    assert signal_name(signal.SIGTERM) == "SIGTERM"
    assert signal_name(signal.SIGINT) == "SIGINT"
    assert signal_name(200) == "signal 200"
