"""The mechanism under test: a batched black-box sampler and the kind and dimension of its outputs.

MPL (Askin, Kutta & Dette, Askin, Kutta & Dette) only ever *samples* a mechanism: ``sampler(x, n, rng)`` runs
it ``n`` times on the input ``x`` and returns the ``n`` outputs as one array. Outputs are either

* ``"discrete"`` — integers (a discrete algorithm, output space ⊂ ℤ; vectors of bits or indices are
  encoded as one integer by the sampler), shape ``(n,)``, any integer dtype; or
* ``"continuous"`` — finite floats in ℝ^d with a continuous density, shape ``(n,)`` for d = 1 and
  ``(n, d)`` otherwise, a floating dtype.

:meth:`MechanismUnderTest.sample` calls the sampler and checks that it honoured ``n``, the shape and
the dtype (:func:`check_samples`), so a wrong sampler fails loudly at the first call and not as a
silently wrong bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms.base import check_rng

OutputKind = Literal["discrete", "continuous"]
KINDS: tuple[OutputKind, ...] = ("discrete", "continuous")

#: Largest sample size (``n``, ``n_confidence``, a grid's points per axis) MPL accepts, as the
#: audit spec does. The catalogue's samplers peak at 9-260 bytes a draw (SVT6 the most), so one
#: sample of 10⁷ draws takes at most about 2.6 GB; MPL holds two samples at a time.
MAX_SAMPLE_SIZE = 10**7


class Sampler(Protocol):
    """Run a mechanism ``n`` times on input ``x`` with randomness from ``rng`` only."""

    def __call__(self, x: Any, n: int, rng: np.random.Generator, /) -> npt.NDArray[Any]: ...


def check_kind(kind: object) -> OutputKind:
    """Return ``kind`` if it is ``"discrete"`` or ``"continuous"``, else raise."""
    if kind not in KINDS:
        raise InvalidParameterError(
            f"Invalid kind: {kind!r}; an output kind is 'discrete' or 'continuous'."
        )
    return kind


def check_sample_size(name: str, n: object) -> int:
    """Return ``n`` as an int in ``1..MAX_SAMPLE_SIZE``, or raise naming it."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or int(n) < 1:
        raise InvalidParameterError(f"Invalid {name}: {n!r}; a sample size is an integer >= 1.")
    if int(n) > MAX_SAMPLE_SIZE:
        raise InvalidParameterError(
            f"Invalid {name}: {n!r}; the largest allowed is {MAX_SAMPLE_SIZE} (MAX_SAMPLE_SIZE: "
            "up to about 260 bytes a draw)."
        )
    return int(n)


def check_samples(
    samples: npt.ArrayLike,
    *,
    kind: OutputKind,
    dim: int = 1,
    n: int | None = None,
    name: str = "samples",
) -> npt.NDArray[Any]:
    """Return ``samples`` as an array after checking shape, dtype and (if given) the count ``n``.

    Discrete samples come back as int64 of shape ``(n,)``; continuous ones as float64 of shape
    ``(n,)`` (d = 1) or ``(n, d)``. Raises :class:`InvalidParameterError` naming what is wrong.
    """
    check_kind(kind)
    arr = np.asarray(samples)
    want = "(n,)" if dim == 1 else f"(n, {dim})"
    if arr.ndim == 0 or arr.shape[0] == 0:
        raise InvalidParameterError(f"Invalid {name}: empty (shape {arr.shape}); need >= 1 draw.")
    if (dim == 1 and arr.ndim != 1) or (dim > 1 and (arr.ndim != 2 or arr.shape[1] != dim)):
        raise InvalidParameterError(
            f"Invalid {name}: shape {arr.shape}; a {kind} mechanism of dimension {dim} "
            f"returns shape {want}."
        )
    if n is not None and arr.shape[0] != n:
        raise InvalidParameterError(
            f"Invalid {name}: {arr.shape[0]} draws returned where n = {n} were asked for."
        )
    if kind == "discrete":
        if not np.issubdtype(arr.dtype, np.integer):
            raise InvalidParameterError(
                f"Invalid {name}: dtype {arr.dtype} for a discrete mechanism; return integers "
                "(encode indices or bit vectors as int)."
            )
        return arr.astype(np.int64, copy=False)
    if not np.issubdtype(arr.dtype, np.floating):
        raise InvalidParameterError(
            f"Invalid {name}: dtype {arr.dtype} for a continuous mechanism; return floats."
        )
    out = arr.astype(np.float64, copy=False)
    if not np.all(np.isfinite(out)):
        bad = out[~np.isfinite(out)].ravel()[0]
        raise InvalidParameterError(f"Invalid {name}: contains {bad!r}; outputs must be finite.")
    return out


def check_sample_pair(
    samples_x: npt.ArrayLike, samples_x_prime: npt.ArrayLike, kind: OutputKind
) -> tuple[npt.NDArray[Any], npt.NDArray[Any], int]:
    """Draws at x and at x′ through :func:`check_samples`, both of the dimension of ``samples_x``;
    and that dimension."""
    x0 = np.asarray(samples_x)
    dim = 1 if x0.ndim <= 1 else int(x0.shape[1])
    x = check_samples(samples_x, kind=kind, dim=dim, name="samples_x")
    y = check_samples(samples_x_prime, kind=kind, dim=dim, name="samples_x_prime")
    return x, y, dim


@dataclass(frozen=True)
class MechanismUnderTest:
    """A black-box mechanism: its batched sampler, output kind and output dimension.

    >>> lap = MechanismUnderTest("laplace", lambda s, n, rng: s + rng.laplace(0, 1, n),
    ...                          "continuous")
    >>> lap.sample(0.5, 3, np.random.default_rng(0)).shape
    (3,)
    """

    name: str
    sampler: Sampler
    kind: OutputKind
    dim: int = 1

    def __post_init__(self) -> None:
        check_kind(self.kind)
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 1:
            raise InvalidParameterError(f"Invalid dim: {self.dim!r}; an integer >= 1.")
        if self.kind == "discrete" and self.dim != 1:
            raise InvalidParameterError(
                f"Invalid dim: {self.dim} for a discrete mechanism; encode vector outputs as one "
                "integer (dim = 1)."
            )
        if not callable(self.sampler):
            raise InvalidParameterError(f"Invalid sampler: {self.sampler!r} is not callable.")

    def sample(self, x: Any, n: int, rng: np.random.Generator) -> npt.NDArray[Any]:
        """Run the mechanism ``n`` times on ``x``; the output is checked (:func:`check_samples`)."""
        n = check_sample_size("n", n)
        check_rng(rng)
        out = self.sampler(x, n, rng)
        return check_samples(out, kind=self.kind, dim=self.dim, n=n, name=f"{self.name} output")
