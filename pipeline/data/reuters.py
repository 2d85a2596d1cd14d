"""Reuters newswire topics: Keras' reuters.npz -> padded int32 sequences with Keras' split.

The split reproduces `keras.datasets.reuters.load_data` (shuffle seeded 113, `test_split`
0.2, indices shifted by `index_from` with 1 as the start mark and 2 as out-of-vocabulary), so
that test figures compare with published ones. Unlike `load_data(maxlen=...)`, long
sequences are truncated, never dropped.

A newswire's text becomes the same sequence as the dataset's own (`encode_texts`): split into
words as Keras made the data (lowercased, punctuation but the apostrophe removed), each word's
rank looked up in Keras' word index, then indexed, capped and padded by the code that prepares
the splits. The preprocess stage keeps the word index beside the splits for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from pipeline.data.arrays import class_counts, split_validation
from pipeline.errors import DataError
from pipeline.io import read_json, reading

if TYPE_CHECKING:  # a type alone: the config is the wing above
    from pipeline.config.schema import ReutersPreprocessConfig

NPZ_NAME = "reuters.npz"
WORD_INDEX_NAME = "reuters_word_index.json"
PAD, START, OOV = 0, 1, 2
# Keras' `text_to_word_sequence` filters: what separates words besides whitespace
WORD_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'


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


def pad(sequences: list[np.ndarray], max_len: int, padding: str, truncating: str) -> np.ndarray:
    """Pad with 0 and truncate to `max_len`, on the 'pre' or 'post' side (Keras semantics)."""
    out = np.zeros((len(sequences), max_len), dtype=np.int32)
    for i, seq in enumerate(sequences):
        seq = seq[-max_len:] if truncating == "pre" else seq[:max_len]
        if padding == "pre":
            out[i, max_len - len(seq) :] = seq
        else:
            out[i, : len(seq)] = seq
    return out


def load_word_index(path: Path | str) -> dict[str, int]:
    """Keras' reuters_word_index.json: {word: rank}, ranks from 1 (the most frequent word)."""
    index = read_json(Path(path))
    if not (
        isinstance(index, dict)
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in index.values())
    ):
        raise DataError(
            f"{path}: expected a JSON object of words and their ranks (positive integers), as Keras publishes it"
        )
    return index


def prepare(raw_dir: Path | str, cfg: ReutersPreprocessConfig) -> tuple[dict, dict]:
    """The download folder -> ({split: (x, y)}, stats): every dataset module's entry point."""
    return split_and_pad(*load_raw(raw_dir), cfg)


def assets(raw_dir: Path | str) -> dict:
    """What the prepared folder keeps besides the splits, for a model that reads text: the word
    index (checked)."""
    path = Path(raw_dir) / WORD_INDEX_NAME
    if not path.is_file():
        raise DataError(f"{path}: missing; run the download stage first")
    return {WORD_INDEX_NAME: load_word_index(path)}


class Encoding(Protocol):
    """How a newswire's word ranks become the ids a model reads: preprocess.reuters' keys, or a
    served model's copy of them (its settings)."""

    @property
    def index_from(self) -> int: ...
    @property
    def skip_top(self) -> int: ...
    @property
    def max_len(self) -> int: ...
    @property
    def padding(self) -> str: ...
    @property
    def truncating(self) -> str: ...


def class_names(num_classes: int) -> list[str]:
    """The 46 topics as Keras names them (an older Keras has no names: the topics by number)."""
    import keras  # only a served model asks, and it has TensorFlow loaded already

    names = list(getattr(keras.datasets.reuters, "get_label_names", lambda: ())())
    return names if len(names) == num_classes else [str(c) for c in range(num_classes)]


def index_sequence(ranks: np.ndarray, cfg: Encoding, vocab_size: int) -> np.ndarray:
    """Word ranks -> the ids the model reads: the start mark, ranks shifted by `index_from`,
    then `in_vocabulary`, as Keras' load_data."""
    return in_vocabulary(np.concatenate(([START], np.asarray(ranks, dtype=np.int64) + cfg.index_from)), cfg, vocab_size)


def in_vocabulary(ids: np.ndarray, cfg: Encoding, vocab_size: int) -> np.ndarray:
    """Ids outside [skip_top, vocab_size) become the out-of-vocabulary mark."""
    ids = np.asarray(ids, dtype=np.int64)
    return np.where((ids >= cfg.skip_top) & (ids < vocab_size), ids, OOV)


def words(text: str) -> list[str]:
    """A newswire's words as Keras split the dataset's texts."""
    return text.lower().translate(str.maketrans(WORD_FILTERS, " " * len(WORD_FILTERS))).split()


def encode_texts(texts: list[str], word_index: dict[str, int], cfg: Encoding, vocab_size: int) -> np.ndarray:
    """Texts -> int32 [n, max_len], as the prepared splits hold them. A word the index lacks
    gets a rank past the vocabulary, so that `index_sequence` marks it out-of-vocabulary."""
    unknown = vocab_size
    ranks = [np.array([word_index.get(w, unknown) for w in words(t)], dtype=np.int64) for t in texts]
    return pad([index_sequence(r, cfg, vocab_size) for r in ranks], cfg.max_len, cfg.padding, cfg.truncating)


def texts(sequences, word_index: dict[str, int], index_from: int) -> list[str]:
    """Sequences as the splits hold them, back to text: each id's word, the padding, start and
    out-of-vocabulary marks left out (`encode_texts` of the text gives the sequence again
    whenever it holds no out-of-vocabulary mark)."""
    by_id = {rank + index_from: word for word, rank in word_index.items()}
    return [" ".join(by_id[i] for i in np.asarray(seq).tolist() if i in by_id) for seq in sequences]


def encode_sequences(sequences: list, cfg: Encoding, vocab_size: int) -> np.ndarray:
    """Sequences as Keras' load_data gives them (start mark, shifted ids, any length, padded or
    not) -> int32 [n, max_len], through `in_vocabulary` as the splits' were. Padding (0) stays
    padding."""
    kept = [np.asarray(s, np.int64) for s in sequences]
    return pad(
        [np.where(s == PAD, PAD, in_vocabulary(s, cfg, vocab_size)) for s in kept],
        cfg.max_len,
        cfg.padding,
        cfg.truncating,
    )


def split_and_pad(sequences: list[np.ndarray], labels: np.ndarray, cfg: ReutersPreprocessConfig) -> tuple[dict, dict]:
    """Split, index, cap and pad. Returns ({split: (x, y)}, stats)."""
    n = len(sequences)
    order = np.arange(n)
    np.random.RandomState(cfg.split_seed).shuffle(order)
    labels = labels[order]
    largest = max((int(sequences[i].max()) + cfg.index_from for i in order if len(sequences[i])), default=START)
    vocab_size = cfg.num_words if cfg.num_words else largest + 1
    shifted = [index_sequence(sequences[i], cfg, vocab_size) for i in order]
    lengths = np.array([len(s) for s in shifted])
    x = pad(shifted, cfg.max_len, cfg.padding, cfg.truncating)

    n_train_all = int(n * (1 - cfg.test_split))
    train_idx, val_idx = split_validation(n_train_all, cfg.validation_split, cfg.validation_seed)
    splits = {
        "train": (x[:n_train_all][train_idx], labels[:n_train_all][train_idx]),
        "val": (x[:n_train_all][val_idx], labels[:n_train_all][val_idx]),
        "test": (x[n_train_all:], labels[n_train_all:]),
    }
    num_classes = int(labels.max()) + 1 if n else 0
    stats = {
        "input": "sequences",
        "num_classes": num_classes,
        "vocab_size": int(vocab_size),
        "max_len": cfg.max_len,
        "samples": {k: int(len(v[1])) for k, v in splits.items()},
        "class_counts": {k: class_counts(v[1], num_classes) for k, v in splits.items()},
        "length_mean": float(lengths.mean()) if n else 0.0,
        "length_max": int(lengths.max()) if n else 0,
        "truncated_fraction": float((lengths > cfg.max_len).mean()) if n else 0.0,
        # how a text becomes a sequence (encode_texts), besides vocab_size and max_len
        "encoding": {
            "index_from": cfg.index_from,
            "skip_top": cfg.skip_top,
            "padding": cfg.padding,
            "truncating": cfg.truncating,
        },
    }
    splits = {k: (xv, yv.astype(np.int32)) for k, (xv, yv) in splits.items()}
    return splits, stats
