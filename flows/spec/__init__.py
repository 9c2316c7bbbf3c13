"""The audit spec (a TOML file validated by pydantic) and the plan of what it computes.

The spec's public face: ``AuditSpec`` (``flows.spec.model``), ``load_spec`` / ``parse_spec`` /
``default_spec_text`` (``flows.spec.files``); the plan: ``flows.spec.plan.make_plan``.
"""

from flows.spec.files import default_spec_text, load_spec, parse_spec
from flows.spec.model import AuditSpec

__all__ = ["AuditSpec", "default_spec_text", "load_spec", "parse_spec"]
