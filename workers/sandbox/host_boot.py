"""The learner host's first module: put the learner's folders on ``sys.path``, after the host's own.

The host runs as ``python -I -B -m workers.sandbox.host_boot``: isolated mode ignores
``PYTHONPATH`` and every other ``PYTHON*`` variable, the user's site folder and the working
folder, so when :mod:`site` runs (and looks for ``sitecustomize`` and ``usercustomize``) only
this installation's own folders are on the path. The learner's folders (an unpacked bundle, an
image's ``/opt/learner`` and site-packages), named in ``LEARNER_IMPORT_PATH``, are appended
afterwards: plain entries, so a ``.pth`` file in them is never processed, and last, so a
learner's ``ray``, ``torch``, ``numpy``, ``services`` or ``workers`` cannot shadow the host's
own (the host's modules are imported before the learner's folders join the path). Learner
code still runs in this process (it is the sandbox's), but only from the host's own calls.
"""

from __future__ import annotations

import os
import sys

LEARNER_PATH_VAR = "LEARNER_IMPORT_PATH"


def learner_paths(environ: dict[str, str] | os._Environ[str] = os.environ) -> list[str]:
    """The learner's folders, in order, from ``LEARNER_IMPORT_PATH``."""
    return [p for p in environ.get(LEARNER_PATH_VAR, "").split(os.pathsep) if p]


def main() -> None:
    # The host's own code first: this installation's packages may come from an import hook
    # that Python asks only after every sys.path entry, so a learner's ``services`` package
    # must not be on the path when they are first imported.
    from workers.sandbox import host_start  # noqa: PLC0415

    sys.path.extend(p for p in learner_paths() if p not in sys.path)
    host_start.main()


__all__ = ["LEARNER_PATH_VAR", "learner_paths", "main"]


if __name__ == "__main__":
    main()
