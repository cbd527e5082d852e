"""Database access of the coordinator: plain keyword-only functions, one job each.

They never commit: the caller (a route, the scheduler, the worker harness) owns the
transaction, so a request's writes land together or not at all.
"""
