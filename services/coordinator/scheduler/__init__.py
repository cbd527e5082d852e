"""The causal scheduler: claims the next task of each submission, watches it, reaps it.

Public face: :class:`~services.coordinator.scheduler.loop.Scheduler`. The decisions it takes
(is a lease dead? retry or give up?) are small objects in :mod:`.policy`, testable without a
database or a cluster; the database work is in :mod:`.leases`.
"""
