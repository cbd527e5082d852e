"""Probes of learned representations: mismatch curves, LiDAR and RankMe.

The metric functions live in :mod:`workers.probe.probe_metrics` (pure numpy). This package
file stays free of imports so that importing a light sub-module never pulls in heavy ones.
"""
