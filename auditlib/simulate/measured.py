"""What a TopDown release measures: the queries of a privacy-loss allocation
(:mod:`auditlib.allocations`) an attribute schema expresses, per level, with their σ².

The allocations name queries as the Census Bureau's DAS does (``"votingage * hispanic * cenrace"``,
``"hhgq"``, ``"detailed"`` over its full histogram); a schema names its own (``"votingage * race"``,
``"detailed"`` over its cells). :func:`schema_query` maps one to the other through attribute aliases
and the schema's product of all attributes. A query the schema cannot express is an error
(:func:`allocation_measured` names them) unless the caller lists it in ``skip``: dropping the race
queries because ``cenrace`` was not aliased would silently lose half the measurements.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from auditlib.allocations import Allocation
from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography.schema import AttributeSchema


def schema_query(
    query: str,
    query_names: Sequence[str],
    attribute_aliases: Mapping[str, str] | None = None,
    detailed_as: str | None = None,
    schema: AttributeSchema | None = None,
) -> str | None:
    """The schema's name of an allocation query, or None if the schema cannot express it.

    Attribute names are mapped through ``attribute_aliases`` (e.g. ``cenrace`` → ``race`` for the
    reduced race of the ``pl94`` schema); ``detailed_as`` is the product of all the schema's attributes
    (``"votingage * hispanic * race"``), which the schema calls ``detailed``. With ``schema``, any
    query it accepts (recodes included) is its canonical name."""
    if query in query_names:
        return query
    if schema is not None and schema.has_query(query):
        return schema.canonical_query(query)
    aliases = attribute_aliases or {}
    name = " * ".join(aliases.get(p.strip(), p.strip()) for p in query.split("*"))
    if name in query_names:
        return name
    if detailed_as is not None and name == detailed_as and "detailed" in query_names:
        return "detailed"
    return None


def unexpressible_queries(
    allocation: Allocation,
    levels: Sequence[str],
    query_names: Sequence[str],
    universe: str = "persons",
    region: str = "US",
    *,
    attribute_aliases: Mapping[str, str] | None = None,
    detailed_as: str | None = None,
    schema: AttributeSchema | None = None,
) -> tuple[str, ...]:
    """The allocation's queries at ``levels`` that the schema cannot express (by
    :func:`schema_query`), sorted, each once: the ``skip`` of a caller who means to leave them out
    (e.g. ``hhgq`` for a schema without group quarters, or everything but ``total`` for the
    one-cell schema)."""
    return tuple(
        sorted(
            {
                b.query
                for level in levels
                for b in allocation.select(universe, region, level)
                if schema_query(b.query, query_names, attribute_aliases, detailed_as, schema)
                is None
            }
        )
    )


def allocation_measured(
    allocation: Allocation,
    levels: Sequence[str],
    query_names: Sequence[str],
    neighbours: str,
    universe: str = "persons",
    region: str = "US",
    *,
    attribute_aliases: Mapping[str, str] | None = None,
    detailed_as: str | None = None,
    skip: Iterable[str] = (),
    schema: AttributeSchema | None = None,
) -> list[list[tuple[str, float]]]:
    """Per level, the allocation's queries as the attribute schema names them (by
    :func:`schema_query`), with their σ²; a query measured twice keeps both measurements.

    Every query the schema cannot express must be listed in ``skip`` (allocation names; see
    :func:`unexpressible_queries`), else :class:`~auditlib.exceptions.UnknownNameError` names them:
    with the ``pl94`` schema, ``attribute_aliases={"cenrace": "race"}`` and
    ``detailed_as="votingage * hispanic * race"`` express the race queries, and ``hhgq`` and
    ``hhinstlevels`` (no group quarters in the schema) are left out only through ``skip``; with
    ``schema=schema("pl94_production")`` every query of ``pl94_2021_production`` is expressed.

    A level measuring none of the expressed queries but measuring something gets, if the schema
    has ``total``, the total at the level's combined precision: each query's cell sum estimates the
    total with variance ``n_cells · σ²``, so ``σ²_total = 1 / Σ_q 1 / (n_cells_q σ²_q)`` (a
    total-only stand-in for an allocation, such as the DHC's, without a total query).
    """
    skipped = {skip} if isinstance(skip, str) else set(skip)
    missing = sorted(
        set(
            unexpressible_queries(
                allocation,
                levels,
                query_names,
                universe,
                region,
                attribute_aliases=attribute_aliases,
                detailed_as=detailed_as,
                schema=schema,
            )
        )
        - skipped
    )
    if missing:
        raise UnknownNameError(
            f"Unknown queries for the schema ({', '.join(query_names)}): allocation "
            f"{allocation.allocation_id!r} measures {', '.join(repr(q) for q in missing)}, which the "
            "schema cannot express; map attribute names with attribute_aliases (e.g. "
            "{'cenrace': 'race'}) and the product of all attributes with detailed_as, or leave "
            f"them out with skip={missing!r}"
        )
    out = []
    for level in levels:
        budgets = allocation.select(universe, region, level)
        got = []
        for b in budgets:
            q = schema_query(b.query, query_names, attribute_aliases, detailed_as, schema)
            if q is not None:
                got.append((q, b.noise_variance(neighbours)))  # another noise: NoiseVariance
        if not got and "total" in query_names and budgets:
            prec = sum(1.0 / (b.n_cells * b.noise_variance(neighbours)) for b in budgets)
            got = [("total", 1.0 / prec)]
        if not got:
            raise InvalidParameterError(
                f"Invalid schema for allocation {allocation.allocation_id!r}: none of its queries at "
                f"{level!r} ({', '.join(b.query for b in budgets)}) is in the schema "
                f"({', '.join(query_names)}); choose a schema that has them"
            )
        out.append(got)
    return out
