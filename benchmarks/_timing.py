"""One method for every speed claim of benchmarks/README.md: two callables (the reference and the
new code) alternated A, B, A, B, … in one process after a warm-up of each, the median CPU seconds
of each and the ratio of the medians, with the machine's CPU model, cores and load average.

CPU seconds are ``time.process_time()`` of this process: every thread of it (BLAS threads
included), not its child processes. A callable that times itself (work in a child process, a part
of a call) returns :class:`SelfTimed`, whose figures are taken instead.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _machine import cpu_model


@dataclass(frozen=True)
class SelfTimed:
    """What a callable returns when it measured its own work: CPU-s, wall s, and its value."""

    cpu: float
    wall: float
    value: Any = None


@dataclass
class Paired:
    """The CPU-s and wall s of each round of two alternated callables, and the load around them."""

    labels: tuple[str, str]
    cpu: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))
    wall: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))
    values: list[Any] = field(default_factory=lambda: [None, None])
    load: list[float] = field(default_factory=list)

    def median_cpu(self, i: int) -> float:
        return statistics.median(self.cpu[i])

    def median_wall(self, i: int) -> float:
        return statistics.median(self.wall[i])

    @property
    def ratio(self) -> float:
        """Median CPU-s of the first callable over the second's (how many times faster B is)."""
        return self.median_cpu(0) / max(self.median_cpu(1), 1e-12)

    @property
    def load_range(self) -> str:
        return f"{min(self.load):.1f}–{max(self.load):.1f}"

    def line(self, digits: int = 3) -> str:
        """``A med CPU-s vs B med CPU-s: ratio×`` with the rounds, wall medians and load."""
        a, b = self.labels
        n = len(self.cpu[0])
        return (
            f"{a} {self.median_cpu(0):.{digits}f} vs {b} {self.median_cpu(1):.{digits}f} median "
            f"CPU-s ({n} alternated rounds): {self.ratio:.2f}× | wall medians "
            f"{self.median_wall(0):.{digits}f} / {self.median_wall(1):.{digits}f} s | load "
            f"{self.load_range}"
        )


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if isinstance(out, SelfTimed):
        return out.cpu, out.wall, out.value
    return cpu, wall, out


def alternate(
    a: Callable[[], Any],
    b: Callable[[], Any],
    *,
    rounds: int = 5,
    warmup: int = 1,
    labels: tuple[str, str] = ("reference", "new"),
) -> Paired:
    """Run ``a`` and ``b`` ``warmup`` times each (not counted), then ``rounds`` times alternately
    (A, B, A, B, …); the load average is read before, between the rounds and after. Each
    callable's last value is kept in :attr:`Paired.values`."""
    out = Paired(labels)
    out.load.append(os.getloadavg()[0])
    for _ in range(warmup):
        a()
        b()
    for _ in range(rounds):
        for i, fn in enumerate((a, b)):
            cpu, wall, value = _timed(fn)
            out.cpu[i].append(cpu)
            out.wall[i].append(wall)
            out.values[i] = value
        out.load.append(os.getloadavg()[0])
    return out


def method_line(rounds: int, warmup: int = 1) -> str:
    """The method and the machine, to print above the figures."""
    return (
        f"method: median time.process_time() (every thread of this process) of {rounds} "
        f"alternated rounds after {warmup} warm-up of each | CPU {cpu_model()} | "
        f"{os.cpu_count()} logical CPUs | load {os.getloadavg()[0]:.2f} | "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )


def median_cpu(fn: Callable[[], Any], *, rounds: int = 5, warmup: int = 1) -> tuple[float, float]:
    """Median CPU-s and median wall s of ``rounds`` calls of one callable after ``warmup`` calls
    (an absolute figure, e.g. a sampling rate, by the same method as :func:`alternate`)."""
    for _ in range(warmup):
        fn()
    cpu, wall = [], []
    for _ in range(rounds):
        c, w, _ = _timed(fn)
        cpu.append(c)
        wall.append(w)
    return statistics.median(cpu), statistics.median(wall)


def child_timed(
    argv: list[str], *, cwd: str | Path, env: dict[str, str], pattern: str, label: str = ""
) -> SelfTimed:
    """Run ``argv`` as a fresh process and take its own figures from its output: ``pattern`` (a
    regular expression with groups named ``cpu`` and ``wall``) on its stdout. For runs that must
    each start cold (or run another checkout's code), alternated as processes with
    :func:`alternate`."""
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout
    m = re.search(pattern, out)
    if m is None:
        raise RuntimeError(f"no match of {pattern!r} in the output of {argv}:\n{out}")
    print(f"  {label}: {m.group(0)}", flush=True)
    return SelfTimed(float(m.group("cpu")), float(m.group("wall")), m.group(0))


class PeakRSS:
    """The process's peak resident set size (bytes) over a block, sampled every ``every`` s
    (``peak`` before the block: the resident size when made)."""

    def __init__(self, every: float = 0.1) -> None:
        import psutil

        self._proc = psutil.Process()
        self._every = every
        self._stop = threading.Event()
        self.peak = self._proc.memory_info().rss
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)
