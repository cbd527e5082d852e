"""Probes of learned representations: mismatch curves, LiDAR and RankMe.

Split by concern: ``scores`` (the metrics as pure functions of arrays; the public face is
:mod:`workers.probe.scores.probe_metrics`), ``fits`` (the target models trained on frozen
features) and ``runtime`` (the pool: planning, claiming, computing and committing jobs).
``scores`` and ``fits`` import nothing of ``runtime``. This package file stays free of imports
so that importing a light sub-module never pulls in heavy ones.
"""
