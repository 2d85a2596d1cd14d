"""The preprocess section of each kind of dataset and reader (pipeline/config/datasets.py says
which dataset takes which): one frozen dataclass each, its keys' meanings and checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional, Union

from pipeline.config.fields import fraction, is_sha256, non_negative_int, positive_int, spec


def _validation_split():
    """The field both datasets' preprocess sections share."""
    return fraction(
        help="The share of the training part held out for validation; 0: none (then early "
        "stopping cannot monitor a val_* metric)."
    )


def _stratify(holds_out: str, drawn_by: str, every: str):
    """The key of the readers whose splits this project draws (Keras' Reuters split is Keras')."""
    return spec(
        "true or false",
        help=f"true: {holds_out} class by class: of each class, round(share x its count) samples, at least 1 "
        "of a class of 2 or more and never all of a class's (a class of 1 stays in training), drawn by "
        f"{drawn_by}; so a rare class is in {every}, and class_weight: balanced has a weight for each. false: "
        "the share of all the samples, drawn at random (a rare class may be missing from a split).",
    )


def _kind():
    return spec(
        "'image_folders' or 'labelled_texts'",
        help="What the dataset's samples are: image_folders (pictures in a folder per class) or labelled_texts "
        "(texts and their labels); with the reader, which keys its preprocess and train sections hold "
        "(docs/own-data.md).",
    )


def _reader(help: str):
    return spec(help="How the download folder is read: " + help)


@dataclass(frozen=True)
class _TextsPreprocessConfig:
    """The keys both readers of labelled texts take."""

    kind: Literal["labelled_texts"] = _kind()
    num_words: Optional[int] = spec(
        "a positive integer or null",
        lambda v: v > 0,
        help="Vocabulary cap: rarer words become the out-of-vocabulary mark; null keeps every word.",
    )
    max_len: int = positive_int(
        help="Sequence length: shorter texts are padded, longer ones truncated (never dropped)."
    )
    padding: Literal["pre", "post"] = spec(help="The side padding is added on.")
    truncating: Literal["pre", "post"] = spec(help="The side long texts are cut on.")
    test_split: float = fraction(help="The share of the texts held out for testing.", low_open=True)
    split_seed: int = non_negative_int(help="Shuffle seed of the train/test split.")
    validation_split: float = _validation_split()
    validation_seed: int = non_negative_int(help="Seed of the validation hold-out.")


@dataclass(frozen=True)
class ReutersPreprocessConfig(_TextsPreprocessConfig):
    reader: Literal["keras"] = _reader(
        "keras: Keras' Reuters arrays (reuters.npz) and word index, split as Keras' load_data splits them "
        "(test_split 0.2 and split_seed 113, Keras' own, give its 8,982 train and 2,246 test texts)."
    )
    skip_top: int = non_negative_int(help="The most frequent words to mark out-of-vocabulary.")
    index_from: int = spec(
        "an integer >= 3 (0 pad, 1 start, 2 out-of-vocabulary)",
        lambda v: v >= 3,
        help="Keras' shift of the word indices: 0 is padding, 1 the start mark, 2 out-of-vocabulary.",
    )


@dataclass(frozen=True)
class TextTablePreprocessConfig(_TextsPreprocessConfig):
    reader: Literal["table"] = _reader(
        "table: one CSV (with a header line) or JSON Lines file of a text column and a label column."
    )
    text_column: str = spec("a column name", lambda v: bool(v), help="The column holding each sample's text.")
    label_column: str = spec(
        "a column name",
        lambda v: bool(v),
        help="The column holding each sample's label (text or integer); the classes are its values, sorted.",
    )
    stratify: bool = _stratify(
        "the test share, then the validation share of the rest, are held out",
        "split_seed and validation_seed",
        "every split (from 3 samples on, with a test_split below 0.5)",
    )


@dataclass(frozen=True)
class ImageFoldersPreprocessConfig:
    kind: Literal["image_folders"] = _kind()
    reader: Literal["folders", "digits"] = _reader(
        "folders: train|training and test|testing folders of a folder per class named by its label; "
        "digits: the same, whose classes are the digits 0-9 (MNIST), and a served picture is read as "
        "MNIST's digits are drawn (a light digit on a dark ground)."
    )
    image_size: int = positive_int(
        help="The side every picture is resized to in pixels (square; bilinear) when it is not that size already."
    )
    color: Literal["grey", "rgb"] = spec(help="Pictures are kept grey (one channel) or in colour (RGB).")
    validation_split: float = _validation_split()
    validation_seed: int = non_negative_int(
        help="Seed of the validation hold-out, and of the order the training split is written in."
    )
    stratify: bool = _stratify(
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


# a preprocess section of any dataset
PreprocessConfig = Union[ReutersPreprocessConfig, TextTablePreprocessConfig, ImageFoldersPreprocessConfig]
