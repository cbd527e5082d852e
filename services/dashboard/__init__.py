"""The leaderboard dashboard: server-rendered pages over the read models, served by the
coordinator process (``nevis serve``). The top layer: it reads, it never writes."""

__all__: list[str] = []
