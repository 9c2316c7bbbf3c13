"""In-process reuse of the accountant's expensive pieces, keyed on exact values.

Two caches, both keyed on exact ``Fraction`` variances and every setting that shapes the result:

* the certified measure of ``count`` i.i.d. ``N_Z(0, sigma2)`` summed (``(sigma2, count)``), shared
  by every composition that holds that group (per-level and composed accounting of one run);
* whole :class:`~auditlib.accounting.discrete_gaussian_pld.DiscreteGaussianComposition` objects
  (components as given plus the constructor's keyword arguments), shared by the accounting of a
  composition and the first step (``c = 1``) of its calibration, and by repeated calls.

A cached object is the very object the uncached path would build (same code, same inputs), so every
number is bit-identical with caching on or off; the arrays of cached measures are made read-only so
that no caller can change them in place. Both caches are bounded (least recently used first out)
and live only as long as the process: :func:`clear` empties them, :func:`caching` switches them off
(for comparisons).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

#: most recently used entries kept per cache
MAX_MEASURES = 256
MAX_COMPOSITIONS = 2  # a bracket-mode composition can hold tens of MB

_enabled = True
_caches: dict[str, OrderedDict[Hashable, Any]] = {
    "measure": OrderedDict(),
    "composition": OrderedDict(),
}
_limits = {"measure": MAX_MEASURES, "composition": MAX_COMPOSITIONS}
stats = {"hits": 0, "misses": 0}


def memoized(kind: str, key: Hashable, build: Callable[[], T]) -> T:
    """``build()``, or the object an earlier call with the same ``kind`` and ``key`` built."""
    if not _enabled:
        return build()
    cache = _caches[kind]
    if key in cache:
        cache.move_to_end(key)
        stats["hits"] += 1
        return cache[key]
    stats["misses"] += 1
    value = build()
    cache[key] = value
    while len(cache) > _limits[kind]:
        cache.popitem(last=False)
    return value


def clear() -> None:
    """Forget every cached measure and composition."""
    for cache in _caches.values():
        cache.clear()
    stats.update(hits=0, misses=0)


@contextmanager
def caching(enabled: bool) -> Iterator[None]:
    """Within the block, reuse cached pieces (``True``) or always rebuild them (``False``)."""
    global _enabled
    before = _enabled
    _enabled = enabled
    try:
        yield
    finally:
        _enabled = before
