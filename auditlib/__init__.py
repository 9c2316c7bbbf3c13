"""dpaudit's mathematics: mechanisms, geography and populations, simulation, EPL, MPL, accounting.

Everything here is pure (numpy/scipy), takes explicit ``numpy.random.Generator``s and knows nothing of
Prefect, Dask or Zarr. Orchestration lives in ``flows``; persistence in ``storage``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dpaudit")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
