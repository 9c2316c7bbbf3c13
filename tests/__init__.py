"""The test suite (a package: a top-level ``tests`` that a dependency installs cannot shadow it)."""
