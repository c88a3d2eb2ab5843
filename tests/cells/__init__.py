"""A catalogue of everyday notebook cells, run plainly and under ``%%compile`` (see harness.py)."""
