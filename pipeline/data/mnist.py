"""MNIST image folders in an archive -> uint8 arrays at native size.

Accepted layouts (zip or tar, optionally under one top folder such as `mnist_png/`):
`{train,training}/<digit>/<image>` and `{test,testing}/<digit>/<image>`, images PNG or JPEG.
Images are read straight from the archive, never unpacked to disk. Every image must be
`image_size` square; colour or palette images are converted to grayscale with Pillow's
ITU-R 601-2 luma rule (`convert("L")`). Anything that is not an image inside a class folder
is an error, so no sample is silently dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import numpy as np

from pipeline.data import archives
from pipeline.data.arrays import class_counts, split_validation
from pipeline.errors import DataError
from pipeline.io import reading

if TYPE_CHECKING:  # a type alone: the config is the wing above
    from pipeline.config.schema import MnistPreprocessConfig

SPLIT_NAMES = {"train": "train", "training": "train", "test": "test", "testing": "test"}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
NUM_CLASSES = 10  # the digits, one class folder each (pipeline/config/datasets.py says as much)
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")
# a picture of one digit larger than this is refused before it is decoded (a 4096x4096 image
# already decodes to 16 MB of grey)
MAX_DIGIT_SIDE = 4096
MAX_DIGIT_PIXELS = MAX_DIGIT_SIDE * MAX_DIGIT_SIDE
log = logging.getLogger("pipeline")


def find_archive(raw_dir: Path | str) -> Path:
    """The one archive in the download folder."""
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        raise DataError(f"{raw_dir}: missing; run the download stage first")
    found = sorted(p for p in raw_dir.iterdir() if p.name.lower().endswith(ARCHIVE_SUFFIXES))
    if len(found) != 1:
        raise DataError(f"{raw_dir}: expected exactly one archive ({', '.join(ARCHIVE_SUFFIXES)}), found {len(found)}")
    return found[0]


def _locate(name: str) -> tuple[str, str, str] | None:
    """(split, class folder, file name) of an archive path, or None outside the split folders."""
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".")]
    if parts and parts[0] == "__MACOSX":
        return None
    for i, part in enumerate(parts[:-1]):
        if part.lower() in SPLIT_NAMES and i <= 1:
            rest = parts[i + 1 :]
            if len(rest) != 2:
                raise DataError(f"{name}: expected <split>/<digit>/<image>, got a file at depth {len(rest)}")
            return SPLIT_NAMES[part.lower()], rest[0], rest[1]
    return None


def decode_image(data: bytes, name: str, image_size: int) -> np.ndarray:
    """A dataset image: exactly `image_size` square, as grayscale uint8."""
    with _opened(data, name) as img:
        if img.size != (image_size, image_size):
            raise DataError(f"{name}: expected a {image_size}x{image_size} image, got {img.size[0]}x{img.size[1]}")
        return _gray(img)


def read_digit(data: bytes, name: str, image_size: int) -> np.ndarray:
    """Any PNG or JPEG of one digit -> uint8 [image_size, image_size] as the dataset holds its
    images: grayscale by the same rule, a light digit on a dark ground (a dark digit on a light
    ground, as a photographed or scanned one, is inverted: told by the border's mean; one drawn
    on a transparent canvas is laid on white first), resized with Pillow's area-averaging
    filter. The digit should fill the picture, as MNIST's do."""
    from PIL import Image

    with _opened(data, name, MAX_DIGIT_PIXELS) as img:
        if img.mode in ("RGBA", "LA", "PA") or "transparency" in img.info:
            # drawn on a transparent canvas: the ink over white paper, not over black
            flat = Image.new("RGBA", img.size, "white")
            flat.alpha_composite(img.convert("RGBA"))
            img = flat
        gray = _gray(img)
    border = np.concatenate([gray[0], gray[-1], gray[:, 0], gray[:, -1]])
    if border.mean() > 127:
        gray = 255 - gray
    if gray.shape != (image_size, image_size):
        gray = np.asarray(Image.fromarray(gray, "L").resize((image_size, image_size), Image.Resampling.BOX))
    return gray


@contextlib.contextmanager
def _opened(data: bytes, name: str, max_pixels: int | None = None):
    from PIL import Image, UnidentifiedImageError

    with reading(name, "unreadable image"):
        try:
            opened = Image.open(io.BytesIO(data))
        except UnidentifiedImageError:  # its message names a BytesIO object
            raise DataError(f"{name}: unreadable image: not a PNG or JPEG file") from None
    with reading(name, "unreadable image"), opened as img:
        if img.format not in ("PNG", "JPEG"):
            raise DataError(f"{name}: expected a PNG or JPEG image, got {img.format}")
        if max_pixels is not None and img.width * img.height > max_pixels:  # read from the header: not decoded
            raise DataError(
                f"{name}: a {img.width}x{img.height} image; expected one digit, at most "
                f"{MAX_DIGIT_SIDE}x{MAX_DIGIT_SIDE} pixels"
            )
        img.load()
        yield img


def _gray(img) -> np.ndarray:
    # Pillow's ITU-R 601-2 luma rule; an alpha channel is dropped
    return np.asarray(img if img.mode == "L" else img.convert("L"), dtype=np.uint8)


def read_archive(archive: Path | str, image_size: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Decode every image: {'train': (x, y), 'test': (x, y)}, sorted by class then file name."""
    archive = Path(archive)
    found: dict[str, list[tuple[int, str, np.ndarray]]] = {"train": [], "test": []}
    with reading(archive, "truncated or corrupt archive"):
        for name, handle in archives.members(archive):
            where = _locate(name)
            if where is None:
                continue
            split, label, filename = where
            if not (len(label) == 1 and label.isdigit()):
                raise DataError(f"{archive}: {name}: class folder {label!r} is not a digit 0-9")
            if not filename.lower().endswith(IMAGE_SUFFIXES):
                raise DataError(f"{archive}: {name}: not a PNG or JPEG image")
            image = decode_image(handle.read(), f"{archive}: {name}", image_size)
            found[split].append((int(label), name, image))
    out = {}
    for split, items in found.items():
        if not items:
            raise DataError(
                f"{archive}: no {split} images: expected a folder named "
                f"{' or '.join(k for k, v in SPLIT_NAMES.items() if v == split)}"
            )
        items.sort(key=lambda t: (t[0], t[1]))
        x = np.stack([t[2] for t in items])
        y = np.array([t[0] for t in items], dtype=np.uint8)
        out[split] = (x, y)
    return out


def assets(raw_dir: Path | str) -> dict:
    """Nothing besides the splits: a model of digits needs no vocabulary."""
    return {}


def class_names(num_classes: int) -> list[str]:
    """The digits, as a served model answers with them."""
    return [str(c) for c in range(num_classes)]


def prepare(raw_dir: Path | str, cfg: MnistPreprocessConfig) -> tuple[dict, dict]:
    """The download folder -> ({split: (x, y)}, stats): every dataset module's entry point.
    The images are checked against `cfg.images_sha256` first, when it is set."""
    archive = find_archive(raw_dir)
    images = read_archive(archive, cfg.image_size)
    digest = images_digest(images)
    pinned = getattr(cfg, "images_sha256", None)
    if pinned and digest != pinned.lower():
        raise DataError(
            f"{archive}: its images are not the ones preprocess.mnist.images_sha256 pins "
            f"(expected {pinned.lower()}, got {digest}): another archive was downloaded"
        )
    if not pinned:
        log.info("images sha256 %s (not checked: set preprocess.mnist.images_sha256 to it to pin them)", digest)
    return split(images, cfg)


def images_digest(images: dict[str, tuple[np.ndarray, np.ndarray]]) -> str:
    """What an archive holds, not how it is packed: the sha256 of, per split (train, then
    test), its image size and count, then each image's label and the sha256 of its pixels,
    sorted. File names, their order, compression and the archive's format do not count, so
    any faithful re-packing of the same images shares it."""
    digest = hashlib.sha256()
    for name in ("train", "test"):
        x, y = images[name]
        entries = sorted(
            f"{int(label)} {hashlib.sha256(np.ascontiguousarray(img).tobytes()).hexdigest()}\n"
            for img, label in zip(x, y)
        )
        digest.update(f"{name} {'x'.join(map(str, x.shape[1:]))} {len(entries)}\n".encode())
        digest.update("".join(entries).encode())
    return digest.hexdigest()


def split(images: dict, cfg: MnistPreprocessConfig) -> tuple[dict, dict]:
    """Hold out a seeded validation split from train. Returns ({split: (x, y)}, stats)."""
    x_train, y_train = images["train"]
    train_idx, val_idx = split_validation(len(y_train), cfg.validation_split, cfg.validation_seed)
    splits = {
        "train": (x_train[train_idx], y_train[train_idx]),
        "val": (x_train[val_idx], y_train[val_idx]),
        "test": images["test"],
    }
    stats = {
        "input": "images",  # uint8 [n, size, size]: the input pipeline scales and resizes them
        "num_classes": NUM_CLASSES,
        "image_size": cfg.image_size,
        "samples": {k: int(len(v[1])) for k, v in splits.items()},
        "class_counts": {k: class_counts(v[1], NUM_CLASSES) for k, v in splits.items()},
    }
    return splits, stats
