"""The report's second process (:mod:`flows.report.parallel`): the page drawn with the EPL section
in a forked child is the page drawn in one process, byte for byte; the child's failures reach the
caller (its exception raised, its warnings warned), and a child that dies without an answer (or
gives none in time) is replaced by the caller's own computation."""

from __future__ import annotations

import os
import pathlib
import time
import warnings

import pytest

from flows.report import parallel
from flows.report.render import render_report
from tests.unit.test_report import build_store

needs_fork = pytest.mark.skipif(
    not parallel.available(), reason="no second core or no fork on this platform"
)


@needs_fork
def test_parallel_and_serial_pages_are_identical(tmp_path: pathlib.Path) -> None:
    store = build_store(tmp_path / "s.zarr", ("accounting", "epl", "residuals", "accuracy", "mpl"))
    serial = render_report(store, tmp_path / "serial.html", parallel=False).read_bytes()
    forked = render_report(store, tmp_path / "forked.html", parallel=True).read_bytes()
    assert b"EPL(x) surfaces at level" in serial
    assert forked == serial


def _fails(x: int) -> int:
    warnings.warn(f"looked at {x}", RuntimeWarning, stacklevel=1)
    raise ValueError(f"bad {x}")


def _warns(x: int) -> int:
    warnings.warn(f"looked at {x}", RuntimeWarning, stacklevel=1)
    return 2 * x


def _dies(x: int) -> int:
    if os.getpid() != _PARENT[0]:
        os._exit(3)  # the child dies without an answer
    return x + 1


_PARENT = [os.getpid()]


@needs_fork
def test_child_result_warnings_and_exception_reach_the_caller() -> None:
    with pytest.warns(RuntimeWarning, match="looked at 4"):
        assert parallel.beside(_warns, 4, parallel=True).result() == 8
    with (
        pytest.warns(RuntimeWarning, match="looked at 5"),
        pytest.raises(ValueError, match="bad 5"),
    ):
        parallel.beside(_fails, 5, parallel=True).result()


@needs_fork
def test_a_child_that_dies_is_replaced_by_the_caller() -> None:
    _PARENT[0] = os.getpid()
    assert parallel.beside(_dies, 1, parallel=True).result() == 2


def test_serial_runs_on_result() -> None:
    calls: list[int] = []
    pending = parallel.beside(calls.append, 7, parallel=False)
    assert calls == []
    pending.result()
    assert calls == [7]


def _unpicklable(x: int) -> object:
    return (lambda: x) if os.getpid() != _PARENT[0] else x


@needs_fork
def test_an_answer_that_does_not_pickle_is_computed_by_the_caller() -> None:
    _PARENT[0] = os.getpid()
    assert parallel.beside(_unpicklable, 3, parallel=True).result() == 3


def _hangs(x: int) -> int:
    if os.getpid() != _PARENT[0]:
        time.sleep(3600)  # a child that never answers (as one stuck on a lock would)
    return x + 2


@needs_fork
def test_a_child_that_never_answers_is_stopped_and_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _PARENT[0] = os.getpid()
    monkeypatch.setattr(parallel, "CHILD_TIMEOUT_S", 1.0)
    pending = parallel.beside(_hangs, 1, parallel=True)
    child = pending._proc
    t0 = time.monotonic()
    assert pending.result() == 3
    assert time.monotonic() - t0 < 30  # the bound, not the child's hour
    assert child is not None and not child.is_alive()
