"""A fixture for every source of the SHORT stream, by catalogue key: ``write_short_sources``
fills ``<data_dir>/sources/`` as ``nevis data fetch`` would (or a mirror's folder, which has
the same layout), so the whole stream can be converted and prepared without the internet.
Where a writer can, it makes a few images per class more than its own tests need, so the
random splits give every split rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.source_fixtures import caltech_melanoma, domains, fine_grained, imagenet, pascal_voc
from tests.support.source_fixtures.brodatz import write_brodatz
from tests.support.source_fixtures.caltech101 import write_caltech101
from tests.support.source_fixtures.cifar_binary import write_cifar10, write_cifar100
from tests.support.source_fixtures.class_folders import (
    write_caltech256,
    write_ig02,
    write_scenes15,
    write_sketch,
    write_uiuc_cars,
)
from tests.support.source_fixtures.coil100 import write_coil100
from tests.support.source_fixtures.idx_sources import write_idx_source
from tests.support.source_fixtures.lfw import write_lfw
from tests.support.source_fixtures.mnist_m import write_mnist_m
from tests.support.source_fixtures.tiny import source_dir
from tests.support.source_fixtures.usps import write_usps

Writer = Callable[[Path], Any]


def _in_folder(key: str, write: Callable[[Path], Any]) -> Writer:
    """A writer that takes the source's own folder, called with the data folder."""
    return lambda data_dir: write(source_dir(data_dir, key))


SHORT_FIXTURES: dict[str, Writer] = {
    "coil100": write_coil100,
    "mnist": lambda d: write_idx_source(d, "mnist", train=20, test=5),
    "fashion_mnist": lambda d: write_idx_source(d, "fashion_mnist", train=20, test=5),
    "cifar10": lambda d: write_cifar10(d, repeat=4),
    "cifar100": lambda d: write_cifar100(d, repeat=4),
    "usps": lambda d: write_usps(d, repeat=4),
    "caltech101": write_caltech101,
    "ig02": lambda d: write_ig02(d, more=6),
    "scenes15": lambda d: write_scenes15(d, more=6),
    "lfw": write_lfw,
    "sketch": lambda d: write_sketch(d, more=6),
    "brodatz": write_brodatz,
    "caltech256": lambda d: write_caltech256(d, more=6),
    "uiuc_cars": lambda d: write_uiuc_cars(d, more=6),
    "mnist_m": lambda d: write_mnist_m(d, more=12),
    "pascal_voc2005": _in_folder("pascal_voc2005", pascal_voc.write_pascal_voc2005),
    "pascal_voc2006": _in_folder("pascal_voc2006", pascal_voc.write_pascal_voc2006),
    "voc_2007": _in_folder("voc_2007", pascal_voc.write_voc_2007),
    "voc_2012": _in_folder("voc_2012", pascal_voc.write_voc_2012),
    "caltech_categories": _in_folder("caltech_categories", caltech_melanoma.write_caltech_categories),
    "melanoma": _in_folder("melanoma", caltech_melanoma.write_melanoma),
    "imagenet2012": _in_folder("imagenet2012", imagenet.write_imagenet2012),
    "office_caltech_10": _in_folder("office_caltech_10", domains.write_office_caltech_10),
    "pacs": _in_folder("pacs", domains.write_pacs),
    "stanford_dogs": _in_folder("stanford_dogs", fine_grained.write_stanford_dogs),
    "caltech_birds2011": _in_folder("caltech_birds2011", fine_grained.write_caltech_birds2011),
    "stanford_cars": _in_folder("stanford_cars", fine_grained.write_stanford_cars),
    "fgvc_aircraft_family": _in_folder("fgvc_aircraft_family", fine_grained.write_fgvc_aircraft_family),
}


def write_short_sources(data_dir: Path) -> list[str]:
    """Every SHORT source's fixture files under ``<data_dir>/sources``; returns the keys."""
    for write in SHORT_FIXTURES.values():
        write(data_dir)
    return sorted(SHORT_FIXTURES)


__all__ = ["SHORT_FIXTURES", "Writer", "write_short_sources"]
