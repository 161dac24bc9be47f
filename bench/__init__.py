"""Benchmarks of the sidecar against bare-transport baselines: ``python -m bench.run``."""
