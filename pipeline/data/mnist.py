"""MNIST's digit folders: image folders (pipeline/data/images.py) whose classes are the digits
0-9, and a served picture read as MNIST's digits are drawn (`read_digit`): the reader `digits`
of kind `image_folders`.

The archive's layout is any image folders' (`{train,training}/<digit>/<image>` and
`{test,testing}/<digit>/<image>`, PNG or JPEG); a class folder that is not one digit is an
error. Pictures of `image_size` are kept as they are, made grey by Pillow's ITU-R 601-2 luma
rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pipeline.data import images
from pipeline.errors import DataError

if TYPE_CHECKING:
    from pipeline.data.prepared import Prepared
    from pipeline.kinds.image_folders import ImageFoldersPreprocessConfig

DIGITS = [str(d) for d in range(10)]


def prepare(raw_dir: Path | str, out: Path | str, cfg: ImageFoldersPreprocessConfig, where: str) -> Prepared:
    """The download folder -> the prepared folder `out`, as `images.prepare`, once every
    class folder is a digit."""
    return images.prepare(raw_dir, out, cfg, where, check_classes=_digits_only)


def _digits_only(folder: Path, classes: list[str], where: str) -> None:
    odd = [c for c in classes if c not in DIGITS]
    if odd:
        raise DataError(f"{folder}: class folder {odd[0]!r} is not a digit 0-9 (the reader digits of {where})")


def read_digit(data: bytes, name: str, image_size: int) -> np.ndarray:
    """Any PNG or JPEG of one digit -> uint8 [image_size, image_size] as the dataset holds its
    images: made 8-bit as the folders' pictures are (`images.eight_bit`: a 16-bit PNG scaled, not
    clipped; one drawn on a transparent canvas laid on white, or on black where it would vanish
    on white), grayscale by the same rule, a light digit on a dark ground (a dark digit on a
    light ground, as a photographed or scanned one, is inverted: told by the border's mean),
    resized with Pillow's area-averaging filter. The digit should fill the picture, as MNIST's
    do."""
    from PIL import Image

    with images.opened(data, name) as img:
        img = images.eight_bit(img, name)
        gray = np.asarray(img if img.mode == "L" else img.convert("L"), dtype=np.uint8)
    border = np.concatenate([gray[0], gray[-1], gray[:, 0], gray[:, -1]])
    if border.mean() > 127:
        gray = 255 - gray
    if gray.shape != (image_size, image_size):
        gray = np.asarray(Image.fromarray(gray, "L").resize((image_size, image_size), Image.Resampling.BOX))
    return gray
