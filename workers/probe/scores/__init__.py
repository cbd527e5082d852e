"""The probe metrics as pure functions of arrays (METRICS.md §2 and §3): mismatch curves and
scores, rank correlations, and LiDAR and RankMe (which live in :mod:`services.core.ranks`, as
the ``proxy`` trial scheduler computes LiDAR too). numpy only; nothing here reads a database, a
store or a checkpoint. :mod:`workers.probe.scores.probe_metrics` is the public face."""
