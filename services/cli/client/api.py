"""A small typed client of the coordinator's REST API (``/v1``), over httpx.

Every answer that is not a success becomes :class:`ApiProblem`, carrying the RFC 7807
problem's title, status, detail and field, so a caller prints what the server said rather
than a traceback; an unreachable server is an :class:`ApiProblem` too (status 0).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from services.cli.client.credentials import Credentials, load_credentials, normalise_url
from services.core.errors import NevisError

FINISHED = ("succeeded", "failed", "stopped", "cancelled")
"""Submission statuses that do not change any more."""
PAGE = 100  # the API's largest page


class ApiProblem(NevisError):
    """A problem the service answered with (or could not be reached: status 0)."""

    def __init__(self, status: int, title: str, detail: str, *, field: str | None = None) -> None:
        where = f" (field: {field})" if field and field not in detail else ""  # no brackets: rich markup
        super().__init__(f"{title} ({status}): {detail}{where}" if status else f"{title}: {detail}", field=field)
        self.status, self.title, self.detail = status, title, detail


@dataclass(frozen=True)
class Learner:
    """A registered learner, as far as the client needs one."""

    id: int
    name: str
    entrypoint: str
    bundle_sha256: str | None
    owner: str | None
    image: str | None = None  # the registered image, pinned by digest

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Learner:
        bundle = doc.get("bundle") or {}
        return cls(
            id=int(doc["id"]),
            name=str(doc["name"]),
            entrypoint=str(doc["entrypoint"]),
            bundle_sha256=bundle.get("sha256"),
            owner=doc.get("owner"),
            image=doc.get("image"),
        )


class NevisClient:
    """The service at ``url``, as the user of ``token`` (anonymous without one).

    ``NevisClient.from_login()`` uses what ``nevis login`` stored (or ``NEVIS_URL`` /
    ``NEVIS_TOKEN``). Methods return the API's JSON documents (dicts), except where noted.
    """

    def __init__(self, url: str, token: str | None = None, *, timeout_s: float = 60.0) -> None:
        self.url = normalise_url(url)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)

    @classmethod
    def from_login(cls, creds: Credentials | None = None) -> NevisClient:
        creds = creds or load_credentials()
        return cls(creds.url, creds.token)

    # --- users and streams ----------------------------------------------------------------------

    def me(self) -> dict[str, Any]:
        """The token's user (name, role, ...): what ``nevis login`` checks a token with."""
        return self._call("GET", "/v1/users/me")

    def streams(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/streams")

    # --- learners ---------------------------------------------------------------------------------

    def learners(self) -> Iterator[Learner]:
        """Every learner this user may use, page by page."""
        offset = 0
        while True:
            page = self._call("GET", "/v1/learners", params={"limit": PAGE, "offset": offset})
            yield from (Learner.from_json(item) for item in page["items"])
            offset += len(page["items"])
            if not page["items"] or offset >= page["total"]:
                return

    def find_learner(self, *, sha256: str, entrypoint: str) -> Learner | None:
        """A learner of this user's registered from a bundle with this content and entry point."""
        me = self.me()["name"]
        return next(
            (
                lr
                for lr in self.learners()
                if lr.bundle_sha256 == sha256 and lr.entrypoint == entrypoint and lr.owner == me
            ),
            None,
        )

    def learner(self, learner_id: int) -> dict[str, Any]:
        """A learner's detail (image and its recorded size, or bundle; resources)."""
        return self._call("GET", f"/v1/learners/{learner_id}")

    def find_image_learner(self, *, image: str, entrypoint: str) -> Learner | None:
        """A learner of this user's registered with this image reference and entry point."""
        me = self.me()["name"]
        return next(
            (lr for lr in self.learners() if lr.image == image and lr.entrypoint == entrypoint and lr.owner == me), None
        )

    def register_image(
        self, image: str, *, name: str, entrypoint: str, cpus: float = 1.0, gpus: int = 0, memory_mb: int = 2048
    ) -> Learner:
        """Register a learner image (``POST /v1/learners``); the service pins it by digest."""
        body = {
            "name": name,
            "entrypoint": entrypoint,
            "image": image,
            "resources": {"cpus": float(cpus), "gpus": int(gpus), "memory_mb": int(memory_mb)},
        }
        return Learner.from_json(self._call("POST", "/v1/learners", json=body))

    def upload_bundle(
        self, archive: Path, *, name: str, entrypoint: str, cpus: float = 1.0, gpus: int = 0, memory_mb: int = 2048
    ) -> Learner:
        """Register a learner from a bundle file (``.tar.gz``, ``.zip`` or wheel)."""
        with archive.open("rb") as handle:
            doc = self._call(
                "POST",
                "/v1/learners/bundle",
                files={"file": (archive.name, handle)},
                data={
                    "name": name,
                    "entrypoint": entrypoint,
                    "cpus": str(cpus),
                    "gpus": str(gpus),
                    "memory_mb": str(memory_mb),
                },
            )
        return Learner.from_json(doc)

    # --- submissions ------------------------------------------------------------------------------

    def submit(
        self,
        *,
        learner_id: int,
        stream: str,
        phase: str = "meta_test",
        budget: Mapping[str, Any] | None = None,
        private: bool = False,
        pinned: bool = False,
        image_size: int | None = None,
        idempotency_key: str | None = None,
        code_url: str | None = None,
        ruleset: str = "open",
    ) -> dict[str, Any]:
        """Queue a submission; a retry with the same ``idempotency_key`` returns the first one."""
        body: dict[str, Any] = {
            "learner_id": learner_id,
            "stream": stream,
            "phase": phase,
            "budget": dict(budget or {}),
            "pinned": pinned,
            "ruleset": ruleset,
            "visibility": "private" if private else "public",
        }
        if image_size is not None:
            body["image_size"] = image_size
        if code_url is not None:
            body["code_url"] = code_url
        key = idempotency_key or uuid.uuid4().hex
        return self._call("POST", "/v1/submissions", json=body, headers={"Idempotency-Key": key})

    def submission(self, submission_id: int) -> dict[str, Any]:
        """Status, current task, per-task results, E and cFLOP."""
        return self._call("GET", f"/v1/submissions/{submission_id}")

    def submissions(self, *, limit: int = 20, status: str | None = None) -> dict[str, Any]:
        """A page of this user's submissions (all, for an admin), newest first."""
        params: dict[str, Any] = {"limit": limit, **({"status": status} if status else {})}
        return self._call("GET", "/v1/submissions", params=params)

    def events(self, submission_id: int, *, after: int = 0) -> dict[str, Any]:
        return self._call("GET", f"/v1/submissions/{submission_id}/events", params={"after": after})

    def cancel(self, submission_id: int) -> dict[str, Any]:
        return self._call("POST", f"/v1/submissions/{submission_id}/cancel")

    def logs(
        self, submission_id: int, *, task: int | None = None, trial: int | None = None, tail_bytes: int | None = None
    ) -> dict[str, Any]:
        """A submission's logs, per trial and prediction job (``GET /v1/submissions/{id}/logs``:
        its owner's and admins' only)."""
        params = {k: v for k, v in (("task", task), ("trial", trial), ("tail_bytes", tail_bytes)) if v is not None}
        return self._call("GET", f"/v1/submissions/{submission_id}/logs", params=params)

    def compare(self, a: int | list[int], b: int | list[int]) -> dict[str, Any]:
        """Run ``a`` against run ``b``, or a's seeds against b's (``GET /v1/compare``)."""
        return self._call("GET", "/v1/compare", params={"a": a, "b": b})

    def leaderboard(
        self, stream: str, *, version: str | None = None, limit: int = 50, ruleset: str = "open"
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "stream": stream,
            "limit": limit,
            "ruleset": ruleset,
            **({"version": version} if version else {}),
        }
        return self._call("GET", "/v1/leaderboard", params=params)

    # --- plumbing ---------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> NevisClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiProblem(0, "Service unreachable", f"{self.url}: {exc}") from None
        if response.is_success:
            return response.json()
        raise problem_of(response)


def problem_of(response: httpx.Response) -> ApiProblem:
    """The RFC 7807 problem of a failed response (or its status line, if it sent none)."""
    try:
        doc = response.json()
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        return ApiProblem(response.status_code, response.reason_phrase or "Error", response.text[:500])
    return ApiProblem(
        response.status_code,
        str(doc.get("title") or response.reason_phrase),
        str(doc.get("detail") or ""),
        field=doc.get("field"),
    )


__all__ = ["FINISHED", "ApiProblem", "Learner", "NevisClient", "problem_of"]
