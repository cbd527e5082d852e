"""``sklearn:digits``: the UCI optdigits set that ships inside scikit-learn's wheel.

1,797 grey 8x8 images with values 0..16, 10 classes, no official split. It needs no file
beyond the installed package, which is why the ``mini`` stream can use it on a fresh machine.
"""

from __future__ import annotations

import numpy as np

from services.core.errors import UnknownNameError, unknown_name_message
from workers.stream.adapters.base import AdapterContext, MissingDataset, RawDataset, content_checksum

_NAMES = ("digits",)


class SklearnAdapter:
    """Datasets bundled with scikit-learn (no download)."""

    source = "sklearn"

    def find(self, name: str, ctx: AdapterContext) -> MissingDataset | None:
        _check(name)
        return None

    def load(self, name: str, ctx: AdapterContext) -> RawDataset:
        _check(name)
        from sklearn.datasets import load_digits  # noqa: PLC0415 - heavy import, used once

        bunch = load_digits()
        # 0..16 → 0..255, rounded half up, so 16 maps to exactly 255.
        images = np.floor(bunch.images * (255.0 / 16.0) + 0.5).astype(np.uint8)[..., None]
        labels = bunch.target.astype(np.int64)
        import sklearn  # noqa: PLC0415

        return RawDataset(
            key=f"sklearn:{name}",
            images=images,
            labels=labels,
            class_names=tuple(str(int(c)) for c in bunch.target_names),
            kind="single",
            source_checksum=content_checksum(images, labels),
            metadata={
                "title": "UCI optdigits (scikit-learn load_digits)",
                "source": f"scikit-learn {sklearn.__version__}: sklearn.datasets.load_digits",
                "original_resolution": [8, 8],
                "preprocessing": "values 0..16 scaled by 255/16 and rounded to uint8",
                "license": "CC BY 4.0 (UCI)",
            },
        )


def _check(name: str) -> None:
    if name not in _NAMES:
        raise UnknownNameError(unknown_name_message("sklearn dataset", name, _NAMES))


__all__ = ["SklearnAdapter"]
