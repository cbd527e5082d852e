"""The procedural shapes datasets: deterministic, balanced, and showing their factors."""

from __future__ import annotations

import colorsys
import hashlib
import time

import numpy as np
import pytest

from services.core.errors import UnknownNameError
from workers.stream.adapters import AdapterContext, load_dataset
from workers.stream.adapters.base import content_checksum
from workers.stream.adapters.shapes import HUE_NAMES, SCALE_NAMES, SHAPES, VARIANTS, draw_factors, generate_shapes

# sha256 over the factor tables (as float64, sorted by name) drawn for 1,200 examples.
# numpy keeps RandomState's stream fixed, so these pin the datasets across machines.
GOLDEN_DIGESTS = {
    "shape": "37751f30fa7433959926766bfcd7ed3945d4a091875f002e55c25a98ce9c9c1b",
    "hue": "2b405a013c78690fa571a29b1d302005493f9ba519c5cfdd1eb05160a1120553",
    "scale": "5bda3cfd4a4d0c62d08344da258ff1339792cc55e49b9d340b475923e23b598b",
    "multi": "1de32829b68740ad632d7809cc2fa8d35da2227263173d22cea95db610d8ea06",
}
# sha256 of the rendered images' bytes followed by the labels' bytes: the same key must give
# byte-identical data on every run and machine (else shards built elsewhere would differ).
GOLDEN_DATA = {
    "shape": "a66ef09e774ab6aa4b0bd65296ed8152932509abb26a92f31e416705f31779d7",
    "hue": "a636954366998b9def0c87fcbd124510493b46fc1594bc5f624b25595253a212",
    "scale": "0e2abd029d244ddc0244361c4fe8bb748a6dc593227f02096c48af31c1a4f343",
    "multi": "b5a773d2ebba75b07e1df6c0cc0e0d321ac65801249fca7a88827a3832d39e62",
}


def _factor_digest(variant: str) -> str:
    factors = draw_factors(variant, 1200)
    digest = hashlib.sha256()
    for name in sorted(factors):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(factors[name], dtype="<f8").tobytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def generated() -> dict[str, object]:
    return {variant: generate_shapes(variant) for variant in VARIANTS}


@pytest.mark.parametrize("variant", VARIANTS)
def test_same_variant_gives_byte_identical_data(variant, generated):
    data = generated[variant]
    digest = hashlib.sha256(data.images.tobytes() + data.labels.tobytes()).hexdigest()
    assert digest == GOLDEN_DATA[variant]


def test_generating_twice_in_one_process_gives_the_same_bytes(generated):
    again = generate_shapes("multi")
    assert again.images.tobytes() == generated["multi"].images.tobytes()


@pytest.mark.parametrize("variant", VARIANTS)
def test_factor_tables_match_their_golden_digest(variant):
    assert _factor_digest(variant) == GOLDEN_DIGESTS[variant]


def test_variants_differ_from_each_other(generated):
    digests = {hashlib.sha256(d.images.tobytes()).hexdigest() for d in generated.values()}
    assert len(digests) == len(VARIANTS)


@pytest.mark.parametrize(("variant", "names"), [("shape", SHAPES), ("hue", HUE_NAMES), ("scale", SCALE_NAMES)])
def test_single_label_variants_are_exactly_balanced(variant, names, generated):
    data = generated[variant]
    assert data.images.shape == (1200, 64, 64, 3) and data.images.dtype == np.uint8
    assert data.labels.dtype == np.int64
    assert data.class_names == names
    assert np.bincount(data.labels, minlength=len(names)).tolist() == [1200 // len(names)] * len(names)


def test_multi_variant_has_one_to_three_objects_and_every_label(generated):
    data = generated["multi"]
    objects = (data.factors["shape"] >= 0).sum(axis=1)
    assert objects.min() == 1 and objects.max() == 3
    assert data.labels.shape == (1200, len(SHAPES)) and data.labels.dtype == np.uint8
    assert (data.labels.sum(axis=0) > 100).all()  # every shape type is common
    for row in range(50):  # the multi-hot row is the set of shapes drawn
        drawn = {int(s) for s in data.factors["shape"][row] if s >= 0}
        assert set(np.flatnonzero(data.labels[row]).tolist()) == drawn


def _object_mask(images: np.ndarray) -> np.ndarray:
    """Pixels saturated like an object (the floor and wall are drawn at saturation 0.45)."""
    rgb = images.astype(np.float32) / 255.0
    high, low = rgb.max(-1), rgb.min(-1)
    return ((high - low) > 0.8 * np.maximum(high, 1e-6)) & (high > 0.85)


def test_hue_label_is_the_colour_of_the_object(generated):
    data = generated["hue"]
    for i in range(40):
        pixels = data.images[i][_object_mask(data.images[i])] / 255.0
        hues = [colorsys.rgb_to_hsv(*p)[0] for p in pixels]
        level = round(float(np.median(hues)) * len(HUE_NAMES)) % len(HUE_NAMES)
        assert level == data.labels[i]


def test_larger_scale_labels_cover_more_pixels(generated):
    data = generated["scale"]
    area = _object_mask(data.images[:400]).sum(axis=(1, 2))
    means = [area[data.labels[:400] == level].mean() for level in range(len(SCALE_NAMES))]
    assert means == sorted(means) and means[0] * 2 < means[-1]


def test_generation_is_fast():
    start = time.perf_counter()
    generate_shapes("scale")
    assert time.perf_counter() - start < 3.0  # well under a second unloaded; 2 busy cores


def test_adapter_returns_the_generated_data_as_a_raw_dataset(generated):
    raw = load_dataset("shapes:multi", AdapterContext())
    assert raw.kind == "multi" and raw.num_examples == 1200 and raw.class_names == SHAPES
    assert raw.images.tobytes() == generated["multi"].images.tobytes()
    assert raw.source_checksum == content_checksum(raw.images, raw.labels)
    assert raw.given_splits is None


def test_unknown_variant_suggests_a_close_name():
    with pytest.raises(UnknownNameError, match="Did you mean 'shape'"):
        load_dataset("shapes:shapes", AdapterContext())
