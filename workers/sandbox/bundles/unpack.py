"""The one pass over a bundle behind both the upload's check and a worker's unpack.

Kept apart from :mod:`workers.sandbox.bundles` (the entry points that name, fetch and place
bundles) so that checking and unpacking share this code path and nothing else: the check is
this pass with the bytes dropped instead of written, so it cannot see less than the unpack
writes. Entries come from :mod:`workers.sandbox.bundles.archives`; they are counted, placed and
measured by the rules of :mod:`workers.sandbox.bundles.limits` as the archive yields them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from services.core.errors import BundleError
from workers.sandbox.bundles.archives import archive_entries
from workers.sandbox.bundles.limits import MemberLayout, UnpackBudget


def unpack(path: Path, *, kind: str, max_unpacked_bytes: int, into: Path | None) -> None:
    """Read, check and count every entry of a bundle, writing its files under ``into`` (or,
    when ``into`` is None, dropping their bytes); the first cap breached stops it.

    Raises:
        BundleError: (field ``file``) what :func:`workers.sandbox.bundles.check_bundle` refuses.
    """
    budget, layout = UnpackBudget(max_unpacked_bytes), MemberLayout()
    for name, is_dir, data in archive_entries(path, kind=kind, budget=budget):
        budget.count_member()
        parts = layout.add(name, is_dir=is_dir)
        target = into.joinpath(*parts) if into is not None else None
        if is_dir:
            if target is not None:
                target.mkdir(parents=True, exist_ok=True)
        else:
            copy_member(data, target, budget)
    if not layout.has_python:
        raise BundleError("The 'file' holds no .py file; a bundle carries Python code.", field="file")


def copy_member(data: Iterator[bytes], target: Path | None, budget: UnpackBudget) -> None:
    """Count a member's bytes as they are inflated (not as declared), before keeping them."""
    with _sink(target) as write:
        for block in data:
            budget.spend(len(block))
            write(block)


@contextmanager
def _sink(target: Path | None) -> Iterator[Callable[[bytes], object]]:
    """Where a member's bytes go: a new file when unpacking, nowhere when only checking."""
    if target is None:
        yield lambda block: None
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "xb") as out:  # the layout was checked: nothing can be there already
        yield out.write


__all__ = ["copy_member", "unpack"]
