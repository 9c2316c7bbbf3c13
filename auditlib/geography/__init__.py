"""Geographic hierarchies and their populations."""

from auditlib.geography.synthetic import (
    NATIONAL,
    STATE,
    PopulationParams,
    SyntheticHierarchy,
    block_populations,
    national_population,
    state_level_populations,
)

__all__ = [
    "NATIONAL",
    "STATE",
    "PopulationParams",
    "SyntheticHierarchy",
    "block_populations",
    "national_population",
    "state_level_populations",
]
