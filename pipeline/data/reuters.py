"""Reuters newswire topics: Keras' reuters.npz -> padded int32 sequences with Keras' split: the
reader `keras` of kind `labelled_texts` (the encoding is every dataset of texts',
pipeline/data/texts.py).

The split reproduces `keras.datasets.reuters.load_data` (shuffle seeded 113, `test_split`
0.2, indices shifted by `index_from` with 1 as the start mark and 2 as out-of-vocabulary), so
that test figures compare with published ones. Unlike `load_data(maxlen=...)`, long
sequences are truncated, never dropped.

A newswire's text becomes the same sequence as the dataset's own (`texts.encode_texts`) through
Keras' published word index, which the preprocess stage keeps beside the splits.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pipeline.data import prepared
from pipeline.data.splits import split_order, splits_of
from pipeline.data.texts import (
    START,
    Lengths,
    index_sequence,
    pad,
    sequence_facts,
)
from pipeline.errors import DataError
from pipeline.io import reading
from pipeline.kinds import labelled_texts
from pipeline.kinds.labelled_texts import load_word_index

if TYPE_CHECKING:
    from pipeline.data.prepared import Prepared
    from pipeline.kinds.labelled_texts import LabelledTextsFacts, ReutersPreprocessConfig

NPZ_NAME = "reuters.npz"
WORD_INDEX_NAME = "reuters_word_index.json"
# the topics in Keras' order (keras.datasets.reuters.get_label_names(), which older Keras lacks)
LABELS = (
    "cocoa", "grain", "veg-oil", "earn", "acq", "wheat", "copper", "housing", "money-supply", "coffee",
    "sugar", "trade", "reserves", "ship", "cotton", "carcass", "crude", "nat-gas", "cpi", "money-fx",
    "interest", "gnp", "meal-feed", "alum", "oilseed", "gold", "tin", "strategic-metal", "livestock",
    "retail", "ipi", "iron-steel", "rubber", "heat", "jobs", "lei", "bop", "zinc", "orange", "pet-chem",
    "dlr", "gas", "silver", "wpi", "hog", "lead",
)  # fmt: skip


def load_raw(raw_dir: Path | str) -> tuple[list[np.ndarray], np.ndarray]:
    """Read reuters.npz: `x`, a sequence of word-index lists, and `y`, integer labels."""
    path = Path(raw_dir) / NPZ_NAME
    if not path.is_file():
        raise DataError(f"{path}: missing; run the download stage first")
    # The file is Keras' own format: an object array of lists, so it needs pickle. Its sha256
    # is checked at download time.
    with reading(path, "not a readable .npz file"), np.load(path, allow_pickle=True) as data:
        missing = [k for k in ("x", "y") if k not in data.files]
        if missing:
            raise DataError(f"{path}: expected arrays 'x' and 'y', missing {missing} (found {sorted(data.files)})")
        xs, ys = data["x"], data["y"]
    if len(xs) != len(ys):
        raise DataError(f"{path}: 'x' has {len(xs)} items but 'y' has {len(ys)}")
    if ys.ndim != 1 or not np.issubdtype(ys.dtype, np.integer) or (len(ys) and ys.min() < 0):
        raise DataError(f"{path}: 'y' must be a 1-D array of non-negative integer labels")
    sequences = []
    for i, seq in enumerate(xs):
        arr = np.asarray(seq)
        if arr.ndim != 1 or (arr.size and (not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0)):
            raise DataError(f"{path}: x[{i}] is not a list of non-negative word indices")
        sequences.append(arr.astype(np.int64))
    return sequences, ys.astype(np.int64)


def prepare(raw_dir: Path | str, out: Path | str, cfg: ReutersPreprocessConfig, where: str) -> Prepared:
    """The download folder -> the prepared folder `out`: every reader's entry point. Keras'
    arrays are one file, read whole as Keras reads it (a few MB); the splits keep Keras'
    seeded order. The assets: Keras' word index (checked), for a model that reads text."""
    path = Path(raw_dir) / WORD_INDEX_NAME
    if not path.is_file():
        raise DataError(f"{path}: missing; run the download stage first")
    word_index = load_word_index(path)
    splits, classes, facts = split_and_pad(*load_raw(raw_dir), cfg)
    return prepared.write_arrays(
        out,
        splits,
        input_=labelled_texts.FORM,
        class_names=classes,
        facts=facts,
        assets={WORD_INDEX_NAME: word_index},
    )


def split_and_pad(
    sequences: list[np.ndarray], labels: np.ndarray, cfg: ReutersPreprocessConfig
) -> tuple[dict, list[str], LabelledTextsFacts]:
    """Split, index, cap and pad. Returns ({split: (x, y)}, class names, the facts of texts)."""
    n = len(sequences)
    order, n_train_all, train_idx, val_idx = split_order(n, cfg)
    largest = max((int(sequences[i].max()) + cfg.index_from for i in order if len(sequences[i])), default=START)
    vocab_size = cfg.num_words if cfg.num_words else largest + 1
    shifted = [index_sequence(sequences[i], cfg, vocab_size) for i in order]
    lengths = Lengths(cfg.max_len)
    for seq in shifted:
        lengths.add(len(seq))
    x = pad(shifted, cfg.max_len, cfg.padding, cfg.truncating)
    splits = splits_of(x, labels[order], n_train_all, train_idx, val_idx)
    num_classes = int(labels.max()) + 1 if n else 0
    classes = list(LABELS) if num_classes == len(LABELS) else [str(c) for c in range(num_classes)]
    return splits, classes, sequence_facts(lengths, cfg, vocab_size, WORD_INDEX_NAME)
