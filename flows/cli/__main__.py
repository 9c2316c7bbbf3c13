"""``python -m flows.cli``: the ``dpaudit`` command."""

from flows.cli.app import main

if __name__ == "__main__":  # pragma: no cover
    main()
