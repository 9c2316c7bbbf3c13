"""The audit spec (a TOML file validated by pydantic) and the plan of what it computes."""
