"""Kind `image_folders`: pictures in a folder per class, prepared as uint8 pictures of one
side, grey or colour. Two readers: `folders` (pipeline/data/images.py) and `digits`, MNIST's
(pipeline/data/mnist.py). Its facts (`ImageFoldersFacts`): the side, colour, reader and the
pictures' digest. Its models are the table `pictures`; its templates `add.image_folders`
(small pictures) and `add.photos` (photos, fine-tuned from ImageNet); its served requests a PNG
or JPEG, or an array of pixels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional

from pipeline.fields import is_sha256, non_negative_int, positive_int, spec
from pipeline.kinds.kind import Kind, Reader, kind_key, reader_key, stratify, validation_split

NAME = "image_folders"
FORM = "images"
# the template for pictures learnt from scratch, and the one for photos (fine-tuned from ImageNet)
SMALL, PHOTOS = "image_folders", "photos"
# the section's reader and colour, as the prepared folder's description says them too
PictureReader = Literal["folders", "digits"]
Color = Literal["grey", "rgb"]


@dataclass(frozen=True)
class ImageFoldersPreprocessConfig:
    kind: str = kind_key()
    reader: PictureReader = reader_key(
        "folders: train|training and test|testing folders of a folder per class named by its label; "
        "digits: the same, whose classes are the digits 0-9 (MNIST), and a served picture is read as "
        "MNIST's digits are drawn (a light digit on a dark ground)."
    )
    image_size: int = positive_int(
        help="The side every picture is resized to in pixels (square; bilinear) when it is not that size already."
    )
    color: Color = spec(help="Pictures are kept grey (one channel) or in colour (RGB).")
    validation_split: float = validation_split()
    validation_seed: int = non_negative_int(
        help="Seed of the validation hold-out, and of the order the training split is written in."
    )
    stratify: bool = stratify(
        "the validation share is held out (the test split is the test folder)",
        "validation_seed",
        "training and validation (from 2 training pictures on)",
    )
    images_sha256: Optional[str] = spec(
        "a 64-digit hex sha256 or null",
        is_sha256,
        help="What the archive holds, not how it is packed: the sha256 of every decoded image and its "
        "label, per split (any faithful re-packing of the same images shares it; docs/stages.md). "
        "Checked before anything is written; null: not checked (a warning, and the digest is printed).",
    )


@dataclass(frozen=True)
class ImageFoldersFacts:
    """What the description of prepared pictures holds of them besides the common keys: their side
    and colour, the reader that read them (a served picture is read as it read them), and the
    pictures' digest (`pipeline.data.images.images_digest`; None: none, selftest's random pixels)."""

    image_size: int
    color: Color
    reader: PictureReader
    images_sha256: Optional[str]


def samples(cfg: Any, n: int, rng: Any) -> tuple[Any, ImageFoldersFacts, dict]:
    """`n` pictures of random pixels of the section's side and colour, their facts, no assets."""
    channels = (3,) if cfg.color == "rgb" else ()
    x = rng.randint(0, 256, (n, cfg.image_size, cfg.image_size, *channels)).astype("uint8")
    return x, ImageFoldersFacts(cfg.image_size, cfg.color, cfg.reader, images_sha256=None), {}


KIND = Kind(
    name=NAME,
    help="pictures in a folder per class: an archive or a folder",
    form=FORM,
    dtype="uint8",
    pictures=True,
    readers={
        "folders": Reader("pipeline.data.images", ImageFoldersPreprocessConfig),
        "digits": Reader("pipeline.data.mnist", ImageFoldersPreprocessConfig),
    },
    models="pictures",
    templates=(SMALL, PHOTOS),
    served="pipeline.serving.forms:Pictures",
    facts=ImageFoldersFacts,
    samples=samples,
)
