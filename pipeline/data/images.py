"""Image folders -> uint8 shards, streamed: the reader of every dataset of kind `image_folders`.

The download folder holds one archive (zip or tar, optionally under one top folder) or the
files themselves, laid out as `{train,training}/<class>/<picture>` and
`{test,testing}/<class>/<picture>`: each class folder's name is its label, the classes are
the training split's folders sorted by name (as Keras' `image_dataset_from_directory` orders
them), and the test split must have the same ones. Pictures are PNG or JPEG of any size up to
`MAX_SIDE` square and of any mode they decode to, read straight from the archive (never
unpacked to disk), made 8 bits a channel as Keras reads them (`eight_bit`: a 16-bit one scaled,
value >> 8, never clipped; palette, 1-bit, CMYK converted; a mode no PNG or JPEG decodes to
refused), a transparent one laid on white (on black where its drawing would vanish on white:
drawn light on a transparent canvas), made grey (Pillow's ITU-R 601-2 luma rule) or RGB
as `color` says, and resized to `image_size` square with Pillow's bilinear filter when they
are not that size already; a served picture goes through the same function (`picture`). The
validation share is held out of the training pictures at random or, with `stratify`, class by
class (`prepared.split_validation`); the test split is the test folder.

Anything in a class folder that is not a picture, a class folder with no picture and a class
one split lacks are errors naming the file, so no sample is silently dropped; what an operating
system leaves (`archives.left_by_os`: `.DS_Store`, `__MACOSX/`, `Thumbs.db`, hidden files) is
passed over and counted in one log line. A picture's file is read with a cap (`MAX_FILE_BYTES`,
what an archive's member expands to included) and its pixels are checked against `MAX_SIDE`
before it is decoded.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Optional

import numpy as np

from pipeline.data import archives, prepared
from pipeline.data import survey as survey_
from pipeline.data.splits import class_quotas, split_validation, training_order
from pipeline.errors import DataError
from pipeline.io import reading
from pipeline.kinds import image_folders
from pipeline.kinds.image_folders import ImageFoldersFacts

if TYPE_CHECKING:
    from pipeline.data.prepared import Prepared
    from pipeline.kinds.image_folders import ImageFoldersPreprocessConfig

SPLIT_NAMES = {"train": "train", "training": "train", "test": "test", "testing": "test"}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
# a picture larger than this is refused before it is decoded (4096x4096 already decodes to
# 48 MB of RGB)
MAX_SIDE = 4096
MAX_PIXELS = MAX_SIDE * MAX_SIDE
# a picture's file is read whole, and no larger than this (what an archive's member expands to
# included): a MAX_SIDE square PNG of 16-bit RGBA stored uncompressed (8 bytes a pixel, a filter
# byte a row), with 32 MiB to spare for its other chunks (a colour profile, metadata)
MAX_FILE_BYTES = MAX_PIXELS * 8 + MAX_SIDE + (32 << 20)
MODES = {"grey": "L", "rgb": "RGB"}
# a transparent picture laid on a ground shows on it where more than this share of its pixels are
# more than this many levels from the ground in a channel (a picture that does not on white is
# laid on black: `flattened`)
SHOWN_SHARE, SHOWN_LEVELS = 0.01, 16
log = logging.getLogger("pipeline")


def source(raw_dir: Path | str, passed_over: Optional[archives.PassedOver] = None) -> Path:
    """What the download folder holds the pictures in: its one archive, or the folder itself
    (what an operating system leaves beside it, as macOS' `._pics.zip`, is passed over)."""
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        raise DataError(f"{raw_dir}: missing; run the download stage first")
    beside = archives.PassedOver()
    found = sorted(p for p in raw_dir.iterdir() if p.is_file() and archives.is_archive(p) and not beside(p.name))
    if found and passed_over is not None:  # else walking the folder counts them
        passed_over.kinds.update(beside.kinds)
    if len(found) > 1:
        raise DataError(f"{raw_dir}: expected one archive or a folder of pictures, found {len(found)} archives")
    return found[0] if found else raw_dir


def entries(where: Path, passed_over: archives.PassedOver) -> Iterator[tuple[str, Optional[IO[bytes]]]]:
    """(path, open file) of every file of an archive or under a folder, and (path/, None) of
    every folder, so that an empty class folder is seen; what an operating system leaves
    (`archives.left_by_os`) counted in `passed_over`, never opened."""
    if where.is_file():
        yield from archives.entries(where, passed_over)
        return
    for root, dirs, files in os.walk(where, followlinks=True):  # a linked folder as its copy (pipeline add)
        dirs.sort()
        rel = Path(root).relative_to(where).as_posix()
        prefix = "" if rel == "." else rel + "/"
        if prefix and not passed_over(prefix):
            yield prefix, None
        for name in sorted(files):
            if passed_over(prefix + name):
                continue
            with open(Path(root) / name, "rb") as handle:
                yield prefix + name, handle


def locate(name: str) -> Optional[tuple[str, str, str]]:
    """(split, class folder, file name) of a path, (split, class folder, "") of a class folder
    (a path ending in "/"), or None outside the split folders."""
    folder = name.endswith("/")
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".")]
    if not parts:
        return None
    for i, part in enumerate(parts if folder else parts[:-1]):
        if part.lower() in SPLIT_NAMES and i <= 1:
            split, rest = SPLIT_NAMES[part.lower()], parts[i + 1 :]
            if folder:  # a class folder; the split folder itself, or one deeper, says nothing
                return (split, rest[0], "") if len(rest) == 1 else None
            if len(rest) != 2:
                raise DataError(f"{name}: expected <split>/<class>/<picture>, got a file at depth {len(rest)}")
            return split, rest[0], rest[1]
    return None


def picture(data: bytes, name: str, image_size: int, color: str, grounds: Optional[Counter] = None) -> np.ndarray:
    """A PNG or JPEG -> uint8 [size, size] (grey) or [size, size, 3] (rgb), as the prepared
    splits hold pictures: made 8-bit and a transparent one laid on its ground (`eight_bit`;
    `grounds` counts those laid on black), then converted, then resized."""
    from PIL import Image

    with opened(data, name) as img:
        img = eight_bit(img, name, grounds)
        img = img.convert(MODES[color]) if img.mode != MODES[color] else img
        if img.size != (image_size, image_size):
            img = img.resize((image_size, image_size), Image.Resampling.BILINEAR)
        return np.asarray(img, dtype=np.uint8)


def eight_bit(img, name: str, grounds: Optional[Counter] = None):
    """A decoded picture of any mode a PNG or JPEG decodes to -> mode L (grey ones) or RGB, 8
    bits a channel, as Keras reads it (TensorFlow's decode_png and decode_jpeg): 16-bit grey
    (Pillow's modes I;16, I;16B, I) scaled to 8 bits as tf.image.convert_image_dtype scales
    (value >> 8: 65535 -> 255, 32768 -> 128), never clipped; 16-bit RGB(A) as Pillow decodes it
    (the same high byte); 1-bit, palette, CMYK converted; transparency (an alpha channel, a
    palette's or a colour's tRNS) laid on white, or on black where it would vanish on white
    (`flattened`, which counts those in `grounds`). Any other mode is refused
    naming it (one DataError), never read as something else."""
    from PIL import Image

    mode = img.mode
    if mode.startswith("I;16") or mode == "I":
        pixels = np.asarray(img)
        if mode == "I" and pixels.size and (pixels.min() < 0 or pixels.max() > 0xFFFF):
            raise DataError(f"{name}: a 32-bit picture (mode I); expected 8 or 16 bits a channel")
        grey = Image.fromarray((pixels.astype(np.uint32) >> 8).astype(np.uint8), "L")
        transparent = img.info.get("transparency")
        if isinstance(transparent, int) and not isinstance(transparent, bool):
            alpha = np.where(pixels == transparent, 0, 255).astype(np.uint8)
            grey = flattened(Image.merge("LA", (grey, Image.fromarray(alpha, "L"))), grounds)
        return grey.convert("L") if grey.mode != "L" else grey
    if mode in ("1", "L", "P", "RGB", "CMYK", "YCbCr"):
        if "transparency" in img.info:
            return flattened(img, grounds).convert("RGB")
        if mode == "1":
            return img.convert("L")
        if mode == "P":  # grey or colour, as its palette is
            return img.convert("RGB")
        return img if mode in ("L", "RGB") else img.convert("RGB")
    if mode in ("LA", "La", "PA", "RGBA", "RGBa"):
        flat = flattened(img, grounds)
        return flat.convert("L") if mode in ("LA", "La") else flat.convert("RGB")
    raise DataError(f"{name}: a picture of Pillow's mode {mode}; expected grey, RGB, CMYK, palette or 1-bit")


def flattened(img, grounds: Optional[Counter] = None):
    """A picture with transparency laid on white (drawn on a transparent canvas: the ink over
    white paper, not over black), unless it vanishes on white and shows on black (drawn light
    on a transparent canvas, as icons for dark panels are): then laid on black (`shows`); any
    other picture as it is. So no picture's drawing is lost to its ground; a served picture is
    laid by the same rule, picture by picture. `grounds`, when given, counts the pictures laid
    on black (its "black")."""
    from PIL import Image

    if img.mode not in ("RGBA", "LA", "PA", "RGBa", "La") and "transparency" not in img.info:
        return img
    drawn = img.convert("RGBA")
    on_white = Image.new("RGBA", img.size, "white")
    on_white.alpha_composite(drawn)
    if shows(on_white, 255):
        return on_white
    on_black = Image.new("RGBA", img.size, "black")
    on_black.alpha_composite(drawn)
    if not shows(on_black, 0):
        return on_white
    if grounds is not None:
        grounds["black"] += 1
    return on_black


def shows(flat, ground: int) -> bool:
    """Whether a picture laid on a grey `ground` (0 or 255) shows anything on it: more than
    `SHOWN_SHARE` of its pixels more than `SHOWN_LEVELS` from the ground in a channel."""
    pixels = np.asarray(flat, dtype=np.int16)[..., :3]
    return bool((np.abs(pixels - ground).max(axis=-1) > SHOWN_LEVELS).mean() > SHOWN_SHARE)


@contextlib.contextmanager
def opened(data: bytes, name: str):
    """The decoded picture, or a DataError naming `name`: not a PNG or JPEG, too large, cut short.
    What Pillow warns about while it reads (a DecompressionBombWarning) is `reading`'s to drop."""
    from PIL import Image, UnidentifiedImageError

    with reading(name, "unreadable image"):
        try:
            found = Image.open(io.BytesIO(data))
        except UnidentifiedImageError:  # its message names a BytesIO object
            raise DataError(f"{name}: unreadable image: not a PNG or JPEG file") from None
        except Image.DecompressionBombError:  # past twice Pillow's own limit: told by the header
            raise DataError(_too_large(name, *_declared_size(data, name))) from None
    with reading(name, "unreadable image"), found as img:
        if img.format not in ("PNG", "JPEG"):
            raise DataError(f"{name}: expected a PNG or JPEG image, got {img.format}")
        if img.width * img.height > MAX_PIXELS:  # read from the header: not decoded
            raise DataError(_too_large(name, img.width, img.height))
        img.load()
        yield img


def _too_large(name: str, width: int, height: int) -> str:
    return f"{name}: a {width}x{height} image; expected at most {MAX_SIDE}x{MAX_SIDE} pixels"


def _declared_size(data: bytes, name: str) -> tuple[int, int]:
    """(width, height) of a PNG or JPEG from its header alone, which Pillow's Image.open will
    not give past its decompression bomb limit."""
    from PIL import JpegImagePlugin, PngImagePlugin

    for plugin in (PngImagePlugin.PngImageFile, JpegImagePlugin.JpegImageFile):
        try:
            with plugin(io.BytesIO(data)) as img:
                return img.size
        except Exception:  # noqa: BLE001 - not this format: the next one
            continue
    raise DataError(f"{name}: expected a PNG or JPEG image, got a picture of another format past {MAX_SIDE}x{MAX_SIDE}")


@dataclass(frozen=True)
class Listing:
    """What the first pass over an archive or folder finds: each split's pictures (member
    name, class index) in the prepared order (by class, then path), and the class names."""

    where: Path
    classes: list[str]
    pictures: dict[str, list[tuple[str, int]]]


def list_pictures(raw_dir: Path | str) -> Listing:
    """The first pass: every picture's member name and class, nothing decoded; the errors of
    the layout (a file that is not a picture, a class folder with none, a class one split
    lacks) before any picture is read."""
    passed_over = archives.PassedOver()
    where = source(raw_dir, passed_over)
    found: dict[str, dict[str, list[str]]] = {"train": {}, "test": {}}
    folders: dict[tuple[str, str], str] = {}  # each class folder's path, for messages
    with reading(where, "truncated or corrupt archive"):
        for name, handle in entries(where, passed_over):
            located = locate(name)
            if located is None:
                continue
            split, label, filename = located
            pictures = found[split].setdefault(label, [])
            folders.setdefault((split, label), name if handle is None else name[: -len(filename)])
            if handle is None:
                continue
            if not filename.lower().endswith(IMAGE_SUFFIXES):
                raise DataError(f"{where}: {name}: not a PNG or JPEG image")
            pictures.append(name)
    passed_over.log(log, where)
    classes = _classes(where, found, folders)
    index = {label: i for i, label in enumerate(classes)}
    ordered = {
        split: sorted((index[label], name) for label, names in per_class.items() for name in names)
        for split, per_class in found.items()
    }
    return Listing(where, classes, {split: [(name, c) for c, name in items] for split, items in ordered.items()})


def _places(listing: Listing, cfg: ImageFoldersPreprocessConfig) -> dict[str, tuple[str, int, int]]:
    """Each picture's (prepared split, place in it, class): the validation hold-out drawn
    from the training pictures by `validation_seed` (class by class with `stratify`); the
    training split in an order drawn from the same seed, so that a bounded shuffle buffer
    draws every class from the first batch on; validation and test in the listing's order."""
    train = listing.pictures["train"]
    labels = np.array([label for _, label in train], dtype=np.int64) if cfg.stratify else None
    train_idx, val_idx = split_validation(len(train), cfg.validation_split, cfg.validation_seed, labels)
    order = training_order(len(train_idx), cfg.validation_seed)
    places = {}
    for place, i in zip(order, train_idx):
        places[train[i][0]] = ("train", int(place), train[i][1])
    for place, i in enumerate(val_idx):
        places[train[i][0]] = ("val", place, train[i][1])
    for place, (name, label) in enumerate(listing.pictures["test"]):
        places[name] = ("test", place, label)
    return places


def prepare(
    raw_dir: Path | str, out: Path | str, cfg: ImageFoldersPreprocessConfig, where: str, check_classes=None
) -> Prepared:
    """The download folder -> the prepared folder `out`, streamed: every reader's entry point
    (`where`: the params section, preprocess.<dataset>). The first pass lists the pictures;
    `check_classes(folder, classes, where)` (a reader's own, as the digits') sees the class
    names; the second decodes each picture once into its split's shards. The pictures are
    checked against `cfg.images_sha256`, when it is set, before the folder appears."""
    listing = list_pictures(raw_dir)
    if check_classes is not None:
        check_classes(listing.where, listing.classes, where)
    places = _places(listing, cfg)
    shape = (cfg.image_size, cfg.image_size) + ((3,) if cfg.color == "rgb" else ())
    counts = Counter(split for split, _, _ in places.values())
    with prepared.Writer(out) as writer:
        splits = {
            name: writer.split(name, counts[name], shape, image_folders.FORM, len(listing.classes))
            for name in ("train", "val", "test")
        }
        hashes = _decode_into(splits, listing.where, places, cfg)
        digest = _check_pinned(listing.where, hashes, shape, cfg, where)
        return writer.finish(
            {name: split.close() for name, split in splits.items()},
            input_=image_folders.FORM,
            shape=shape,
            class_names=listing.classes,
            facts=ImageFoldersFacts(cfg.image_size, cfg.color, cfg.reader, images_sha256=digest),
        )


def _decode_into(splits: dict, where: Path, places: dict, cfg: ImageFoldersPreprocessConfig) -> dict[str, list[str]]:
    """The second pass: each listed picture read (with the cap), decoded and written at its
    place; each one's `sample_hash`, by split (the validation split's with the training's)."""
    hashes: dict[str, list[str]] = {"train": [], "test": []}
    grounds: Counter[str] = Counter()
    with reading(where, "truncated or corrupt archive"):
        for name, handle in entries(where, archives.PassedOver()):  # counted in the first pass
            if handle is None or name not in places:
                continue
            split, place, label = places.pop(name)
            x = picture(
                archives.read_capped(handle, f"{where}: {name}", MAX_FILE_BYTES),
                f"{where}: {name}",
                cfg.image_size,
                cfg.color,
                grounds,
            )
            splits[split].add(place, label, x)
            hashes["test" if split == "test" else "train"].append(sample_hash(label, x))
    if places:  # the archive changed between the passes
        raise DataError(f"{where}: {next(iter(places))}: listed, then not found; download it again")
    if grounds["black"]:
        log.info("%s: of its pictures, %s", where, laid_on_black(grounds["black"]))
    return hashes


def laid_on_black(count: int) -> str:
    """What preprocess and `pipeline add` say of the pictures `flattened` laid on black."""
    one = count == 1
    return (
        f"{count:,} {'is' if one else 'are'} drawn light on a transparent canvas: laid on black, where white "
        f"would hide {'it' if one else 'them'}"
    )


def sample_hash(label: int, x: np.ndarray) -> str:
    return f"{int(label)} {hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()}\n"


def _classes(where: Path, found: dict, folders: dict) -> list[str]:
    """The class names (the training split's folders, sorted); a DataError for a missing split,
    a class folder with no picture, or a class one split has and the other lacks."""
    for split, per_class in found.items():
        if not per_class:
            names = " or ".join(k for k, v in SPLIT_NAMES.items() if v == split)
            raise DataError(f"{where}: no {split} pictures: expected a folder named {names} with a folder per class")
        for label, pictures in sorted(per_class.items()):
            if not pictures:
                raise DataError(f"{where}: {folders[split, label]}: a class folder with no PNG or JPEG picture")
    train, test = sorted(found["train"]), sorted(found["test"])
    for split, mine, other in (("test", train, test), ("train", test, train)):
        lacking = [c for c in mine if c not in other]
        if lacking:
            has = "train" if split == "test" else "test"
            raise DataError(f"{where}: {split} has no folder for class {lacking[0]!r}, which {has} has")
    if len(train) < 2:
        raise DataError(f"{where}: one class ({train[0]!r}); expected two class folders or more")
    if len(train) > 256:
        raise DataError(f"{where}: {len(train)} class folders; expected at most 256")
    return train


def _check_pinned(folder: Path, hashes: dict, shape: tuple, cfg: ImageFoldersPreprocessConfig, where: str) -> str:
    """The pictures' digest (`images_digest`), checked against `cfg.images_sha256` when it is
    set."""
    digest = images_digest(hashes, shape)
    pinned = cfg.images_sha256
    if pinned and digest != pinned.lower():
        raise DataError(
            f"{folder}: its images are not the ones {where}.images_sha256 pins "
            f"(expected {pinned.lower()}, got {digest}): another archive was downloaded"
        )
    if not pinned:
        log.info("images sha256 %s (not checked: set %s.images_sha256 to it to pin them)", digest, where)
    return digest


def images_digest(hashes: dict[str, list[str]], shape: tuple) -> str:
    """What an archive holds, not how it is packed: the sha256 of, per split (train, then
    test), its image size and count, then each image's label and the sha256 of its pixels
    (`sample_hash`), sorted. File names, their order, compression and the archive's format
    do not count, so any faithful re-packing of the same images shares it."""
    digest = hashlib.sha256()
    for name in ("train", "test"):
        entries = sorted(hashes[name])
        digest.update(f"{name} {'x'.join(map(str, shape))} {len(entries)}\n".encode())
        digest.update("".join(entries).encode())
    return digest.hexdigest()


# --------------------------------------------------------------------------- what `pipeline add` reads

# pictures decoded to choose the settings, spread evenly over the listing (the layout and the
# class counts are read from every picture's name)
SURVEY_PICTURES = 1000
# the sides a picture is trained at by the small-picture model: the pictures' own median, within
# these (a smaller one enlarged, a larger one reduced: the cost of a step grows with the side's square)
SMALL_SIDES = (32, 48)
# pictures whose median side is over this are photos, fine-tuned from ImageNet weights; up to it,
# the small-picture model learns them from scratch
PHOTO_SIDE = 128
# a picture has colour where more than this share of its pixels have channels this far apart
COLOUR_SHARE, COLOUR_SPREAD = 0.01, 16
# the small-picture model is trained for as many epochs as it takes to see this many training
# pictures, within EPOCH_BOUNDS: a network learnt from scratch needs some hundreds of steps
# whatever the set's size, and a set of a thousand pictures gives 16 steps of 64 an epoch. An
# epoch also costs its validation and the statistics' recomputation (about 0.7 s on 2 cores
# whatever the set's size), hence the upper bound
PICTURES_SEEN = 60_000
EPOCH_BOUNDS = (30, 150)


def survey(raw_dir: Path | str, cfg: Optional[ImageFoldersPreprocessConfig] = None) -> list[survey_.Choice]:
    """The settings `pipeline add` chooses for image folders, read from the pictures (the layout
    checked as preprocess checks it, `SURVEY_PICTURES` of them decoded as it decodes them): the
    template (photos over `PHOTO_SIDE` pixels a side) or the side to train at and the epochs, the
    colour; and the classes' spread, reported beside the template's class_weight. `cfg` is the
    template's preprocess section: the validation share it holds out of each class is what the
    epochs' count of training pictures leaves out (None: nothing)."""
    listing = list_pictures(raw_dir)
    names = [name for split in ("train", "test") for name, _ in listing.pictures[split]]
    chosen = {names[i] for i in survey_.spread(len(names), SURVEY_PICTURES)}
    sides, coloured = [], 0
    grounds: Counter[str] = Counter()
    with reading(listing.where, "truncated or corrupt archive"):
        for name, handle in entries(listing.where, archives.PassedOver()):
            if handle is None or name not in chosen:
                continue
            where = f"{listing.where}: {name}"
            with opened(archives.read_capped(handle, where, MAX_FILE_BYTES), where) as img:
                sides.append(max(img.size))
                coloured += has_colour(eight_bit(img, where, grounds))
    side = int(np.median(sides))
    read = f"of the {len(sides):,} pictures read" if len(sides) < len(names) else f"of all {len(sides):,} pictures"
    counts = Counter(listing.classes[label] for _, label in listing.pictures["train"])
    dark = f"; {laid_on_black(grounds['black'])}" if grounds["black"] else ""
    colour = survey_.Choice("preprocess.color", "rgb" if coloured else "grey", f"{coloured:,} {read} have colour{dark}")
    weights = survey_.class_weight(counts, "training pictures")
    if side > PHOTO_SIDE:
        why = f"the median side {read} is {side} px, over {PHOTO_SIDE}: photos, fine-tuned from ImageNet weights"
        return [survey_.Choice(survey_.TEMPLATE, image_folders.PHOTOS, why), colour, weights]
    size = min(max(side, SMALL_SIDES[0]), SMALL_SIDES[1])
    bounds = "" if size == side else f", within {SMALL_SIDES[0]} to {SMALL_SIDES[1]}"
    why = f"the median side {read} is {side} px{bounds}"
    return [
        survey_.Choice("preprocess.image_size", size, why, template=image_folders.SMALL),
        small_epochs(list(counts.values()), cfg.validation_split if cfg is not None else 0.0),
        colour,
        weights,
    ]


def small_epochs(counts: list[int], validation_split: float) -> survey_.Choice:
    """The small-picture model's epochs for a training folder of `counts` pictures a class, of
    each of which preprocess holds out the validation share (`class_quotas`): enough epochs to
    see `PICTURES_SEEN` of those left, within `EPOCH_BOUNDS`."""
    training = max(sum(counts) - int(class_quotas(np.asarray(counts), validation_split).sum()), 1)
    wanted = -(-PICTURES_SEEN // training)
    epochs = min(max(wanted, EPOCH_BOUNDS[0]), EPOCH_BOUNDS[1])
    bounds = "" if epochs == wanted else f", within {EPOCH_BOUNDS[0]} to {EPOCH_BOUNDS[1]}"
    why = f"{training:,} training pictures: {wanted:,} epochs to see {PICTURES_SEEN:,}{bounds}"
    return survey_.Choice("train.epochs", epochs, why, template=image_folders.SMALL)


def has_colour(img) -> bool:
    """Whether an 8-bit picture (mode L or RGB, as `eight_bit` gives it) has colour: more than
    `COLOUR_SHARE` of its pixels with channels over `COLOUR_SPREAD` apart (a grey picture saved
    as RGB, JPEG's faint tints included, has none)."""
    if img.mode != "RGB":
        return False
    pixels = np.asarray(img, dtype=np.int16)
    spread = pixels.max(axis=-1) - pixels.min(axis=-1)
    return bool((spread > COLOUR_SPREAD).mean() > COLOUR_SHARE)
