"""``python -m flows.docgen``: rewrite (or ``--check``) docs/spec-reference.md and docs/cli.md.

The generator lives with the command line it documents (``flows.cli.docgen``)."""

from flows.cli.docgen import main

if __name__ == "__main__":
    raise SystemExit(main())
