"""The prepared-data format shared by preprocess, train and evaluate: one .npz per split."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.errors import DataError

SPLITS = ("train", "val", "test")


def save_split(folder: Path, split: str, x: np.ndarray, y: np.ndarray) -> None:
    np.savez(Path(folder) / f"{split}.npz", x=x, y=y)


def load_split(folder: Path | str, split: str) -> tuple[np.ndarray, np.ndarray]:
    path = Path(folder) / f"{split}.npz"
    if not path.is_file():
        raise DataError(f"{path}: missing; run the preprocess stage first")
    try:
        with np.load(path, allow_pickle=False) as data:
            if "x" not in data.files or "y" not in data.files:
                raise DataError(f"{path}: expected arrays 'x' and 'y', found {sorted(data.files)}")
            return data["x"], data["y"]
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot read: {exc}") from None


def split_validation(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, validation) for a seeded random hold-out; each keeps the original order."""
    n_val = int(round(n * fraction))
    perm = np.random.RandomState(seed).permutation(n)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def class_counts(y: np.ndarray, num_classes: int) -> list[int]:
    return np.bincount(y.astype(np.int64), minlength=num_classes).tolist()
