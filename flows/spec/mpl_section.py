"""The ``[mpl]`` section of an audit spec: the maximum privacy loss lower bounds (Askin, Kutta & Dette) of one
released cell count per geolevel, opt-in."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictInt, field_validator

from flows.spec.sections import Strict, _named_some

MPLPair = Literal["add", "remove", "move"]


def _all_pairs() -> list[MPLPair]:
    return ["add", "remove", "move"]


class MPLSection(Strict):
    #: maximum privacy loss (Askin, Kutta & Dette) of one released cell count per geolevel, D vs D′
    enabled: bool = False
    geolevels: Literal["all"] | list[str] = "all"
    query: str = ""  # "": each geolevel's least noisy query (largest rho_q)
    count: Annotated[StrictInt, Field(ge=0, le=10**9)] = 3  # the tested cell's true count in D
    pairs: list[MPLPair] = Field(default_factory=_all_pairs, min_length=1)
    n: Annotated[StrictInt, Field(ge=100, le=10**7)] = 20_000
    n_confidence: Annotated[StrictInt, Field(ge=100, le=10**7)] = 50_000
    alpha: Annotated[float, Field(gt=0, lt=1)] = 0.05
    tau: Annotated[float, Field(gt=0, lt=1)] = 1e-3
    radius_sd: Annotated[float, Field(gt=0, le=50)] = 2.0
    delta_epsilons: list[Annotated[float, Field(ge=0, le=50)]] = Field(
        default_factory=lambda: [0.0, 0.1, 0.5, 1.0], min_length=1
    )
    fdp: bool = True  # also the empirical f-DP points of the count (own draws, n + n_confidence)

    @field_validator("geolevels")
    @classmethod
    def _some_geolevels(cls, v: Any) -> Any:
        return _named_some(v, 'geolevel, e.g. ["County"]')

    @field_validator("pairs")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("must not repeat a pair kind")
        return v
