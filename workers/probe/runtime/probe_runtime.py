"""What a probe worker keeps between jobs (:class:`ProbeRuntime`) and what a job hands back
(:data:`Writer`): see :mod:`workers.probe.runtime.jobs`.

The probe pool calls learner code only through a learner host, in its sandbox: this process
holds the database credentials and never imports a learner.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from services.core.errors import ProbeInputError
from services.store.objects import ObjectStore
from workers.probe.runtime.data import TaskCache
from workers.sandbox.bundles import DEFAULT_MAX_UNPACKED_BYTES, unpack_stored_bundle
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.images import ImageLimits, unpack_image
from workers.sandbox.learner_calls import SandboxedLearner

Writer = Callable[[Session], None]


class ProbeRuntime:
    """What a worker keeps between jobs: database sessions, the store, caches, and one warm
    learner host per learner (the probe pool calls learner code only through a host, in its
    sandbox; this process holds the database credentials and never imports a learner)."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        store: ObjectStore,
        *,
        sandbox: str = "auto",
        import_paths: tuple[str, ...] = (),
        threads: int = 1,
        bundles_dir: Path | None = None,
        bundle_max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES,
        images_dir: Path | None = None,
    ) -> None:
        self.sessions = sessions
        self.store = store
        self.tasks = TaskCache(store)
        self.sandbox, self.import_paths, self.threads = sandbox, import_paths, threads
        self.bundles_dir, self.bundle_max_unpacked_bytes = bundles_dir, bundle_max_unpacked_bytes
        self.images_dir = images_dir
        self._learners: dict[tuple[str, str | None], SandboxedLearner] = {}

    def learner(
        self, spec: str, *, bundle: tuple[str, str] | None = None, image: str | None = None
    ) -> SandboxedLearner:
        """A warm host of learner ``spec``; ``bundle`` is its uploaded bundle's (key, sha256),
        ``image`` its registered image (pinned by digest), unpacked here once and shown
        read-only to the host, as the worker harness does."""
        cache_key = (spec, bundle[1] if bundle else image)
        known = self._learners.get(cache_key)
        if known is not None and known.host.alive:
            return known
        try:
            paths = self.import_paths
            if bundle is not None:
                if self.bundles_dir is None:
                    raise ProbeInputError(
                        "this probe worker has no folder to unpack learner bundles "
                        "into (give it the service's NEVIS_DATA_DIR)"
                    )
                root = unpack_stored_bundle(
                    self.store,
                    key=bundle[0],
                    sha256=bundle[1],
                    root=self.bundles_dir,
                    max_unpacked_bytes=self.bundle_max_unpacked_bytes,
                )
                paths = (str(root), *paths)
            elif image is not None and self.images_dir is not None:
                paths = (*unpack_image(image, cache=self.images_dir, limits=ImageLimits()).import_paths, *paths)
            host = LearnerHost(HostSpec(spec, paths, self.sandbox, self.threads))
        except Exception as exc:
            raise ProbeInputError(f"Cannot load learner {spec!r} to probe it: {exc}") from exc
        self._learners[cache_key] = SandboxedLearner(host)
        return self._learners[cache_key]

    def close(self) -> None:
        """Stop the learner hosts."""
        for learner in self._learners.values():
            learner.host.close()
        self._learners.clear()


__all__ = ["ProbeRuntime", "Writer"]
