"""Geographic hierarchies and their populations."""

from auditlib.geography.attributes import Attribute
from auditlib.geography.flaxman import (
    FlaxmanHierarchy,
    FlaxmanPopulation,
    generate_population,
)
from auditlib.geography.schema import AttributeSchema
from auditlib.geography.spine import Spine, SpineModel, SpineTotals, generate_spine, tallies_2020
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
__all__ += [  # Flaxman's regular hierarchy and the synthetic US spine
    "FlaxmanHierarchy",
    "FlaxmanPopulation",
    "Spine",
    "SpineModel",
    "SpineTotals",
    "generate_population",
    "generate_spine",
    "tallies_2020",
]
__all__ += [  # attribute schemas (the function ``schema`` lives in auditlib.geography.schema)
    "Attribute",
    "AttributeSchema",
]
