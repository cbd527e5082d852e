"""Scheduled benchmark refreshes: re-run the baselines and pinned submissions on a new stream version.

A stream's manifest names its version; when the version a coordinator serves has no refresh
yet, a refresh records it (:mod:`.start`), queues the runs the plan names (:mod:`.plan`) and,
once they have all ended, keeps the version's leaderboard as a snapshot (:mod:`.snapshot`).
A database lock (:mod:`.lock`) and a unique row per version make it idempotent across
replicas; :mod:`.timer` is the scheduler's cron hook.
"""
