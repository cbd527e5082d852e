"""``shapes:<variant>``: procedural scenes in the spirit of 3dshapes, generated on the spot.

Every image shows a wall and a floor (each with its own hue) and one object (three in the
multi-label variant) described by known factors: shape (square, circle, triangle, cross),
scale (4 levels), object hue (6), orientation (15 angles in [-30, 30] degrees) and a small
position jitter. The variants differ in which factor is the label:

- ``shapes:shape`` (4 classes), ``shapes:hue`` (6), ``shapes:scale`` (4): single-label,
  each class exactly balanced;
- ``shapes:multi``: 1–3 objects in three slots, multi-hot over the 4 shape types.

Guarantee: one variant always gives the same factors (drawn with numpy's legacy
``RandomState``, whose stream numpy keeps fixed across versions) and the same pixels, so a
shard built anywhere matches. 1,200 examples at 64x64 take well under a second.
"""

from __future__ import annotations

import colorsys
import math
import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from services.core.errors import UnknownNameError, unknown_name_message
from workers.stream.adapters.base import AdapterContext, MissingDataset, RawDataset, content_checksum

SHAPES = ("square", "circle", "triangle", "cross")
HUE_NAMES = ("red", "yellow", "green", "cyan", "blue", "magenta")
SCALE_NAMES = ("tiny", "small", "medium", "large")
SCALES = (0.12, 0.16, 0.20, 0.24)  # object radius as a fraction of the image side
ORIENTATIONS = np.linspace(-30.0, 30.0, 15)  # degrees
BACKGROUND_HUES = 10  # floor and wall hues, as in 3dshapes
VARIANTS = ("shape", "hue", "scale", "multi")
NUM_EXAMPLES = 1200
IMAGE_SIZE = 64
_SUPERSAMPLE = 2  # sub-pixels per side, for anti-aliased edges
_HORIZON = 0.62  # where the floor starts, as a fraction of the height
_MULTI_SLOTS = (0.2, 0.5, 0.8)  # object centres (x) in the multi-label variant
_MULTI_SCALE = 0.6  # objects share the frame, so they are drawn smaller


@dataclass(frozen=True)
class ShapesData:
    """Generated images, labels and every factor of every object (for probes)."""

    images: np.ndarray  # uint8 [N, S, S, 3]
    labels: np.ndarray  # int64 [N] or uint8 [N, 4]
    class_names: tuple[str, ...]
    factors: dict[str, np.ndarray]  # per-object factors: [N] (single) or [N, 3] (multi; -1 = empty)


class ShapesAdapter:
    """The procedural shapes datasets (no files needed)."""

    source = "shapes"

    def __init__(self, *, num_examples: int = NUM_EXAMPLES, image_size: int = IMAGE_SIZE):  # noqa: ANN204
        self.num_examples = num_examples
        self.image_size = image_size

    def find(self, name: str, ctx: AdapterContext) -> MissingDataset | None:
        _check_variant(name)
        return None

    def load(self, name: str, ctx: AdapterContext) -> RawDataset:
        data = generate_shapes(name, num_examples=self.num_examples, size=self.image_size)
        kind = "multi" if name == "multi" else "single"
        return RawDataset(
            key=f"shapes:{name}",
            images=data.images,
            labels=data.labels,
            class_names=data.class_names,
            kind=kind,
            source_checksum=content_checksum(data.images, data.labels),
            metadata={
                "title": f"Procedural shapes, label = {name}",
                "source": "workers.stream.adapters.shapes (generated, seeded)",
                "seed": variant_seed(name),
                "factors": sorted(data.factors),
                "original_resolution": [self.image_size, self.image_size],
            },
        )


def variant_seed(variant: str) -> int:
    """The fixed seed of a variant (crc32 of its key, so it never depends on dict order)."""
    return zlib.crc32(f"shapes:{variant}".encode())


def generate_shapes(variant: str, *, num_examples: int = NUM_EXAMPLES, size: int = IMAGE_SIZE) -> ShapesData:
    """Draw the factors of ``variant`` and render them.

    Raises:
        UnknownNameError: ``variant`` is not one of :data:`VARIANTS`.
    """
    _check_variant(variant)
    if num_examples < 1 or size < 8:
        raise ValueError(
            f"generate_shapes needs num_examples >= 1 and size >= 8; got {num_examples} and {size} instead."
        )
    factors = draw_factors(variant, num_examples)
    images = np.empty((num_examples, size, size, 3), dtype=np.uint8)
    grid = _subpixel_grid(size)
    for i in range(num_examples):
        images[i] = _render(factors, i, size, grid)
    if variant == "multi":
        labels = np.zeros((num_examples, len(SHAPES)), dtype=np.uint8)
        rows, slots = np.nonzero(factors["shape"] >= 0)
        labels[rows, factors["shape"][rows, slots]] = 1
        names = SHAPES
    else:
        labels = factors[variant].astype(np.int64)
        names = {"shape": SHAPES, "hue": HUE_NAMES, "scale": SCALE_NAMES}[variant]
    return ShapesData(images=images, labels=labels, class_names=names, factors=factors)


def draw_factors(variant: str, n: int) -> dict[str, np.ndarray]:
    """All random choices of a variant, drawn in a fixed order from its seed."""
    rng = np.random.RandomState(variant_seed(variant))
    scene = {"floor_hue": rng.randint(BACKGROUND_HUES, size=n), "wall_hue": rng.randint(BACKGROUND_HUES, size=n)}
    slots = 1 if variant != "multi" else len(_MULTI_SLOTS)
    shape = rng.randint(len(SHAPES), size=(n, slots))
    hue = rng.randint(len(HUE_NAMES), size=(n, slots))
    scale = rng.randint(len(SCALES), size=(n, slots))
    orientation = rng.randint(len(ORIENTATIONS), size=(n, slots))
    jitter = rng.uniform(-0.08, 0.08, size=(n, slots, 2))
    if variant == "multi":
        count = rng.randint(1, slots + 1, size=n)
        order = np.argsort(rng.uniform(size=(n, slots)), axis=1)  # which slots are used
        empty = np.zeros((n, slots), dtype=bool)
        for i in range(n):
            empty[i, order[i, count[i] :]] = True
        for table in (shape, hue, scale, orientation):
            table[empty] = -1
        return {**scene, "shape": shape, "hue": hue, "scale": scale, "orientation": orientation, "jitter": jitter}
    # The label factor is exactly balanced: a fixed cycle, shuffled.
    label_levels = {"shape": len(SHAPES), "hue": len(HUE_NAMES), "scale": len(SCALES)}[variant]
    balanced = rng.permutation(np.arange(n) % label_levels)
    table = {"shape": shape[:, 0], "hue": hue[:, 0], "scale": scale[:, 0]}
    table[variant] = balanced
    return {**scene, **table, "orientation": orientation[:, 0], "jitter": jitter[:, 0]}


def _check_variant(name: str) -> None:
    if name not in VARIANTS:
        raise UnknownNameError(unknown_name_message("shapes variant", name, VARIANTS))


def _subpixel_grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Sub-pixel centre coordinates in pixel units, shape [size*k, size*k] each."""
    k = _SUPERSAMPLE
    axis = (np.arange(size * k, dtype=np.float64) + 0.5) / k
    return np.meshgrid(axis, axis)  # x varies along columns, y along rows


def _rgb(hue: float, saturation: float, value: float) -> np.ndarray:
    return np.array(colorsys.hsv_to_rgb(hue, saturation, value), dtype=np.float64)


@lru_cache(maxsize=256)
def _background(floor_hue: int, wall_hue: int, size: int) -> np.ndarray:
    """Wall above the horizon, floor below, shaded so the floor recedes (read-only)."""
    rows = (np.arange(size, dtype=np.float64) + 0.5) / size
    wall = _rgb(wall_hue / BACKGROUND_HUES, 0.45, 0.8)
    floor = _rgb(floor_hue / BACKGROUND_HUES, 0.45, 0.55)
    shade = np.where(rows < _HORIZON, 1.0 - 0.15 * rows, 0.75 + 0.45 * (rows - _HORIZON))
    colour = np.where((rows < _HORIZON)[:, None], wall, floor) * shade[:, None]
    image = np.broadcast_to(colour[:, None, :], (size, size, 3)).copy()
    image.flags.writeable = False
    return image


def _shape_mask(shape: int, u: np.ndarray, v: np.ndarray, r: float) -> np.ndarray:
    """Sub-pixels inside a shape of radius ``r`` centred at the origin (u right, v down)."""
    if SHAPES[shape] == "square":
        return np.maximum(np.abs(u), np.abs(v)) <= 0.85 * r
    if SHAPES[shape] == "circle":
        return u * u + v * v <= r * r
    if SHAPES[shape] == "triangle":  # equilateral, apex up; inradius half the circumradius
        inradius = 0.6 * r
        return (
            (v <= inradius)
            & (0.8660254037844386 * u - 0.5 * v <= inradius)
            & (-0.8660254037844386 * u - 0.5 * v <= inradius)
        )
    arm = 0.33 * r  # cross
    au, av = np.abs(u), np.abs(v)
    return ((au <= r) & (av <= arm)) | ((av <= r) & (au <= arm))


def _objects(factors: dict[str, np.ndarray], i: int) -> list[tuple[int, ...]]:
    """(slot, shape, scale, hue, orientation, jitter x, jitter y) of each object of image i."""
    if factors["shape"].ndim == 1:
        names = ("shape", "scale", "hue", "orientation")
        return [(-1, *(int(factors[n][i]) for n in names), *factors["jitter"][i].tolist())]
    out = []
    for slot in range(factors["shape"].shape[1]):
        if factors["shape"][i, slot] >= 0:
            values = (int(factors[n][i, slot]) for n in ("shape", "scale", "hue", "orientation"))
            out.append((slot, *values, *factors["jitter"][i, slot].tolist()))
    return out


def _render(factors: dict[str, np.ndarray], i: int, size: int, grid) -> np.ndarray:  # noqa: ANN001
    """One image: background, then each object blended by its sub-pixel coverage."""
    image = _background(int(factors["floor_hue"][i]), int(factors["wall_hue"][i]), size).copy()
    xs, ys = grid
    k = _SUPERSAMPLE
    for slot, shape, scale_level, hue, orientation, jitter_x, jitter_y in _objects(factors, i):
        multi = slot >= 0
        radius = SCALES[scale_level] * (_MULTI_SCALE if multi else 1.0) * size
        centre_x = (_MULTI_SLOTS[slot] + 0.5 * jitter_x if multi else 0.5 + jitter_x) * size
        centre_y = (0.55 + jitter_y) * size
        angle = math.radians(float(ORIENTATIONS[orientation]))
        cos, sin = math.cos(angle), math.sin(angle)
        # Only the pixels around the object can be covered; every shape fits in 1.25 r.
        rows = _window(centre_y, 1.25 * radius, size)
        cols = _window(centre_x, 1.25 * radius, size)
        window = (slice(rows.start * k, rows.stop * k), slice(cols.start * k, cols.stop * k))
        dx, dy = xs[window] - centre_x, ys[window] - centre_y
        mask = _shape_mask(shape, cos * dx + sin * dy, -sin * dx + cos * dy, radius)
        h, w = rows.stop - rows.start, cols.stop - cols.start
        hits = mask.reshape(h, k, w, k).sum(axis=(1, 3), dtype=np.uint8)
        coverage = (hits * (1.0 / (k * k)))[..., None]
        colour = _rgb(hue / len(HUE_NAMES), 0.9, 0.95)
        image[rows, cols] = image[rows, cols] * (1.0 - coverage) + colour * coverage
    return np.rint(np.clip(image, 0.0, 1.0) * 255.0).astype(np.uint8)


def _window(centre: float, half: float, size: int) -> slice:
    """Whole pixels within ``half`` of ``centre``, clipped to the image."""
    return slice(max(0, math.floor(centre - half)), min(size, math.ceil(centre + half) + 1))


__all__ = [
    "BACKGROUND_HUES",
    "HUE_NAMES",
    "IMAGE_SIZE",
    "NUM_EXAMPLES",
    "ORIENTATIONS",
    "SCALES",
    "SCALE_NAMES",
    "SHAPES",
    "VARIANTS",
    "ShapesAdapter",
    "ShapesData",
    "draw_factors",
    "generate_shapes",
    "variant_seed",
]
