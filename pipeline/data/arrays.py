"""The prepared-data format shared by preprocess, train and evaluate: one .npz per split and
the dataset's stats.json, in one folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.errors import DataError
from pipeline.io import atomic_dir, read_json, reading, write_json

SPLITS = ("train", "val", "test")


def save_split(folder: Path, split: str, x: np.ndarray, y: np.ndarray) -> None:
    np.savez(Path(folder) / f"{split}.npz", x=x, y=y)


def load_split(folder: Path | str, split: str) -> tuple[np.ndarray, np.ndarray]:
    path = Path(folder) / f"{split}.npz"
    if not path.is_file():
        raise DataError(f"{path}: missing; run the preprocess stage first")
    with (
        reading(path, "cannot read (cut short or corrupt? run the preprocess stage again)"),
        np.load(path, allow_pickle=False) as data,
    ):
        if "x" not in data.files or "y" not in data.files:
            raise DataError(f"{path}: expected arrays 'x' and 'y', found {sorted(data.files)}")
        return data["x"], data["y"]


def save_prepared(out: Path | str, splits: dict, stats: dict, assets: dict | None = None) -> None:
    """Write every split, the stats and the dataset's assets (`{file name: JSON document}`) to
    the folder `out`, atomically."""
    with atomic_dir(out) as tmp:
        for split, (x, y) in splits.items():
            save_split(tmp, split, x, y)
        write_json(tmp / "stats.json", stats)
        for name, document in (assets or {}).items():
            write_json(tmp / name, document)


def load_prepared(folder: Path | str, splits=SPLITS) -> tuple[dict, dict]:
    """({split: (x, y)}, stats) of a prepared folder."""
    return {s: load_split(folder, s) for s in splits}, read_json(Path(folder) / "stats.json")


def split_validation(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, validation) for a seeded random hold-out; each keeps the original order."""
    n_val = int(round(n * fraction))
    perm = np.random.RandomState(seed).permutation(n)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def class_counts(y: np.ndarray, num_classes: int) -> list[int]:
    return np.bincount(y.astype(np.int64), minlength=num_classes).tolist()
