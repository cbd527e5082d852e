"""The Python client of a remote NEVIS service, the one the ``nevis`` command uses.

From a notebook, after ``nevis login URL`` (or with ``NEVIS_URL`` / ``NEVIS_TOKEN`` set)::

    import tempfile
    from pathlib import Path
    from services.cli.client import NevisClient, pack_learner

    client = NevisClient.from_login()          # or NevisClient("https://...", token="...")
    with tempfile.TemporaryDirectory() as tmp:
        packed = pack_learner(Path("my_learner"), entrypoint="my_learner:make", dest=Path(tmp))
        learner = (client.find_learner(sha256=packed.sha256, entrypoint="my_learner:make")
                   or client.upload_bundle(packed.path, name="linear-1", entrypoint="my_learner:make"))
    sub = client.submit(learner_id=learner.id, stream="mini", phase="meta_train",
                        budget={"trials": 1, "steps": 20})
    client.submission(sub["id"])["status"]     # queued, running, succeeded, ...
    client.leaderboard("mini")["items"]

A refusal from the server raises :class:`ApiProblem` (its ``status``, ``title``, ``detail``,
``field``: the API's RFC 7807 problem).
"""

from services.cli.client.api import FINISHED, ApiProblem, Learner, NevisClient
from services.cli.client.bundle import PackedLearner, pack_learner
from services.cli.client.credentials import Credentials, load_credentials, save_credentials

__all__ = [
    "FINISHED",
    "ApiProblem",
    "Credentials",
    "Learner",
    "NevisClient",
    "PackedLearner",
    "load_credentials",
    "pack_learner",
    "save_credentials",
]
