"""The ``dpaudit`` command line: one module per command group (app: the audit and its store;
accounting; direct), shared options in ``options``, the generated references in ``docgen``."""
