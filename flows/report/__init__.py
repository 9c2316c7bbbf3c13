"""The single-file HTML report, rendered from a result store alone."""
