"""Reuters newswire topics: Keras' reuters.npz -> padded int32 sequences with Keras' split.

The split reproduces `keras.datasets.reuters.load_data` (shuffle seeded 113, `test_split`
0.2, indices shifted by `index_from` with 1 as the start mark and 2 as out-of-vocabulary), so
that test figures compare with published ones. Unlike `load_data(maxlen=...)`, long
sequences are truncated, never dropped.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.data.arrays import class_counts, split_validation
from pipeline.errors import DataError
from pipeline.io import reading

NPZ_NAME = "reuters.npz"
PAD, START, OOV = 0, 1, 2


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
            out[i, max_len - len(seq):] = seq
        else:
            out[i, : len(seq)] = seq
    return out


def prepare(raw_dir: Path | str, cfg) -> tuple[dict, dict]:
    """The download folder -> ({split: (x, y)}, stats): every dataset module's entry point."""
    return split_and_pad(*load_raw(raw_dir), cfg)


def split_and_pad(sequences: list[np.ndarray], labels: np.ndarray, cfg) -> tuple[dict, dict]:
    """Split, index, cap and pad. Returns ({split: (x, y)}, stats)."""
    n = len(sequences)
    order = np.arange(n)
    np.random.RandomState(cfg.split_seed).shuffle(order)
    shifted = [np.concatenate(([START], sequences[i] + cfg.index_from)) for i in order]
    labels = labels[order]
    largest = max((int(s.max()) for s in shifted), default=START)
    vocab_size = cfg.num_words if cfg.num_words else largest + 1
    if cfg.num_words or cfg.skip_top:
        # Words outside [skip_top, num_words) become the out-of-vocabulary mark, as in Keras.
        shifted = [np.where((s >= cfg.skip_top) & (s < vocab_size), s, OOV) for s in shifted]
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
    }
    splits = {k: (xv, yv.astype(np.int32)) for k, (xv, yv) in splits.items()}
    return splits, stats
