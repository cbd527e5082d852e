"""Tiny learner images built with podman, for tests and bench/adversaries.py.

No base image: ``FROM scratch`` plus files, or a layer tarball given to ``podman import``, so
a build takes seconds and needs no registry.

- :func:`build_plain`: the test learners in ``/opt/learner``, plus what a hostile image would
  add to get code run outside the learner's own calls or to shadow the host's modules: a
  ``sitecustomize.py``, a ``usercustomize.py``, ``.pth`` files and fake ``ray`` and
  ``services`` packages, in ``/opt/learner`` and in the site-packages it adds; and an
  ENTRYPOINT, CMD, USER and ENV that must be ignored. Each hostile file, if it ever ran, would
  set a ``builtins.NEVIS_RAN_*`` marker.
- :func:`build_hostile_fs`: a setuid binary, a device node, a hard link, a symlink to ``/``
  and one climbing out of the root.

Both carry ``nevis_img_probe:make``, whose ``init_state()`` reports what the learner host saw.
"""

from __future__ import annotations

import atexit
import io
import json
import shutil
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

FIXTURE_LEARNERS = Path(__file__).resolve().parents[1] / "integration" / "learner_fixtures"
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
MARK = "NEVIS_RAN_"
PROBE = """
import builtins, importlib.util, os
from workers.learners.protocol import Resources, Uniform

HERE = os.path.dirname(os.path.abspath(__file__))

def _mode(name):
    try:
        return os.lstat(os.path.join(HERE, name)).st_mode
    except OSError:
        return None

class Probe:
    name = "image-probe"
    def search_space(self): return {"x": Uniform(0.0, 1.0)}
    def resources(self): return Resources()
    def init_state(self):
        to_root = os.path.join(HERE, "to-root")
        return {"ran": sorted(k for k in dir(builtins) if k.startswith("NEVIS_RAN_")),
                "origins": {m: importlib.util.find_spec(m).origin for m in ("ray", "services", "numpy")},
                "here": HERE, "su": _mode("bin/su"), "hard": _mode("hard"), "dev": _mode("dev0"),
                "escape": _mode("escape"), "to_root": os.path.realpath(to_root),
                "root_listing": sorted(os.listdir(to_root)) if os.path.isdir(to_root) else None}
    def train(self, view, state, config, ctx): raise NotImplementedError
    def predict(self, predictor, images, ctx): raise NotImplementedError
    def features(self, predictor, images, ctx): raise NotImplementedError
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return data

def make(): return Probe()
"""


def marker(what: str) -> str:
    return f"import builtins; builtins.{MARK}{what} = True\n"


def podman(*args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(["podman", *args], input=stdin, capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode()


def build_plain(context: Path, tag: str) -> None:
    learner, hostile = context / "learner", context / "hostile"
    learner.mkdir(parents=True)
    shutil.copy(FIXTURE_LEARNERS / "nevis_test_learners.py", learner)
    (learner / "nevis_img_probe.py").write_text(PROBE)
    (learner / "nevis_cheat_targets.json").write_text(
        json.dumps(
            {
                # the Ray session folder, the database's files, the machine's secrets
                "paths": ["/tmp/ray", "/var/lib/postgresql", "/etc/shadow", "/etc/containers"],
                "ports": [["127.0.0.1", 5432], ["1.1.1.1", 80]],
            }
        )
    )
    for folder in (hostile / "opt" / "learner", hostile / "usr" / "local" / "lib" / PY / "site-packages"):
        (folder / "ray").mkdir(parents=True)
        (folder / "services").mkdir()
        (folder / "sitecustomize.py").write_text(marker("SITECUSTOMIZE"))
        (folder / "usercustomize.py").write_text(marker("USERCUSTOMIZE"))
        (folder / "zz-evil.pth").write_text(marker("PTH"))
        (folder / "ray" / "__init__.py").write_text(marker("FAKE_RAY"))
        (folder / "services" / "__init__.py").write_text(marker("FAKE_SERVICES"))
    (context / "Containerfile").write_text(
        "FROM scratch\nCOPY learner/ /opt/learner/\nCOPY hostile/ /\n"
        "ENV PYTHONPATH=/opt/learner/ray NEVIS_DATABASE_URL=sqlite:///evil\nUSER 0\n"
        'ENTRYPOINT ["/bin/sh", "-c", "exit 3"]\nCMD ["x"]\n'
    )
    podman("build", "-q", "--network", "none", "-t", tag, str(context))


def build_hostile_fs(tag: str) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:

        def add(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", **fields) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.size, info.mode = kind, len(data), fields.pop("mode", 0o644)
            for key, value in fields.items():
                setattr(info, key, value)
            tar.addfile(info, io.BytesIO(data) if data else None)

        add("opt/learner/nevis_img_probe.py", data=PROBE.encode())
        add("opt/learner/bin/su", data=b"\x7fELF not really", mode=0o4755)
        add("opt/learner/hard", tarfile.LNKTYPE, linkname="opt/learner/bin/su")
        add("opt/learner/dev0", tarfile.CHRTYPE, devmajor=1, devminor=3)
        add("opt/learner/to-root", tarfile.SYMTYPE, linkname="/")
        add("opt/learner/escape", tarfile.SYMTYPE, linkname="../../../../../../../../../etc")
    podman("import", "-", tag, stdin=buffer.getvalue())


_SHARED: dict[str, str] = {}


def shared_images(scratch: Path) -> dict[str, str]:
    """``plain`` and ``hostile-fs`` (tags), built once per test process whichever module asks
    first (builds are the slow part of image tests) and removed when the process exits."""
    if not _SHARED:
        assert shutil.which("podman"), "podman is not installed: apt-get install podman"
        suffix = uuid.uuid4().hex[:8]
        tags = {
            "plain": f"localhost/nevis-shared-image-plain-{suffix}:1",
            "hostile-fs": f"localhost/nevis-shared-image-hostile-fs-{suffix}:1",
        }
        build_plain(scratch / f"plain-{suffix}", tags["plain"])
        build_hostile_fs(tags["hostile-fs"])
        atexit.register(
            subprocess.run, ["podman", "rmi", "-f", *tags.values()], capture_output=True, timeout=120, check=False
        )
        _SHARED.update(tags)
    return dict(_SHARED)


__all__ = [
    "FIXTURE_LEARNERS",
    "MARK",
    "PROBE",
    "PY",
    "build_hostile_fs",
    "build_plain",
    "marker",
    "podman",
    "shared_images",
]
