"""Benchmarks: run with ``make bench`` (``python -m bench.<name>``)."""
