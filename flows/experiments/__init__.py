"""The experiments beside the audit, each a resumable chunked flow (``chunked.py``): the
accounting sweep, MPL coverage, f-DP coverage and the direct privacy-loss estimate."""
