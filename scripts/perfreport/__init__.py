"""The sections of scripts/perf-report.py, one module per subject."""
