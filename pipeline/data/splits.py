"""How a dataset's samples are split: the seeded hold-outs (validation, and the texts' test
share, as Keras' Reuters split draws it), unstratified or class by class (`class_quotas`: a rare
class is in every split), and the order the image folders' training split is written in. Each
function returns indices; memory: a few integers a sample."""

from __future__ import annotations

from typing import Optional, Protocol

import numpy as np


class Splitting(Protocol):
    """The keys that split a dataset of texts (preprocess.<dataset>'s)."""

    @property
    def test_split(self) -> float: ...
    @property
    def split_seed(self) -> int: ...
    @property
    def validation_split(self) -> float: ...
    @property
    def validation_seed(self) -> int: ...


def split_order(
    n: int, cfg: Splitting, labels: Optional[np.ndarray] = None
) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """(the seeded order of the samples, how many of it are train and validation, the train and
    validation positions among those), as Keras' Reuters split: a shuffle, the test share last.
    With the samples' `labels` (class indices), both hold-outs are stratified
    (`class_quotas`): of each class, its last samples in the shuffled order are the
    test share (moved to the end, the rest keeping that order), then the validation share is
    held out of the rest class by class."""
    order = np.arange(n)
    np.random.RandomState(cfg.split_seed).shuffle(order)
    if labels is not None:
        labels = np.asarray(labels)
        test = held_out_by_class(labels[order][::-1], cfg.test_split)[::-1]
        order = np.concatenate((order[~test], order[test]))
        n_train_all = int(n - test.sum())
        held_from = labels[order[:n_train_all]]
        train_idx, val_idx = split_validation(n_train_all, cfg.validation_split, cfg.validation_seed, held_from)
        return order, n_train_all, train_idx, val_idx
    n_train_all = int(n * (1 - cfg.test_split))
    train_idx, val_idx = split_validation(n_train_all, cfg.validation_split, cfg.validation_seed)
    return order, n_train_all, train_idx, val_idx


def splits_of(x: np.ndarray, labels: np.ndarray, n_train_all: int, train_idx, val_idx) -> dict:
    """{split: (x, y)} of samples in split order."""
    y = labels.astype(np.int32)
    return {
        "train": (x[:n_train_all][train_idx], y[:n_train_all][train_idx]),
        "val": (x[:n_train_all][val_idx], y[:n_train_all][val_idx]),
        "test": (x[n_train_all:], y[n_train_all:]),
    }


def split_validation(
    n: int, fraction: float, seed: int, labels: Optional[np.ndarray] = None
) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, validation) for a seeded random hold-out; each keeps the original order.
    Without `labels`, the first round(n x fraction) of a seeded permutation are held out; with
    the samples' `labels` (class indices), the hold-out is stratified: of each class, the first
    `class_quotas` of its samples in that permutation."""
    if labels is not None:
        perm = np.random.RandomState(seed).permutation(n)
        held = held_out_by_class(np.asarray(labels)[perm], fraction)
        return np.sort(perm[~held]), np.sort(perm[held])
    n_val = int(round(n * fraction))
    perm = np.random.RandomState(seed).permutation(n)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def class_quotas(counts: np.ndarray, fraction: float) -> np.ndarray:
    """How many samples of each class (of `counts` samples each) a stratified split holds out:
    round(fraction x count) (half to even, as the unstratified split rounds its total), at least
    one of a class of two samples or more (when fraction > 0), and never all of a class's: a
    class of one sample keeps it. So a class of two or more samples is in both parts."""
    counts = np.asarray(counts, dtype=np.int64)
    quotas = np.rint(counts * fraction).astype(np.int64)
    if fraction > 0:
        quotas = np.maximum(quotas, (counts >= 2).astype(np.int64))
    return np.minimum(quotas, np.maximum(counts - 1, 0))


def held_out_by_class(labels: np.ndarray, fraction: float) -> np.ndarray:
    """Which samples a stratified split holds out, the samples (their class indices) in an
    order already drawn: of each class, its first `class_quotas` samples in that order. A
    boolean array; memory: a few integers a sample."""
    labels = np.asarray(labels, dtype=np.int64)
    counts = np.bincount(labels)
    by_class = np.argsort(labels, kind="stable")  # by class, each class in the given order
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))  # each class's first place in by_class
    rank = np.empty(len(labels), dtype=np.int64)
    rank[by_class] = np.arange(len(labels)) - first[labels[by_class]]
    return rank < class_quotas(counts, fraction)[labels]


def training_order(n: int, seed: int) -> np.ndarray:
    """The place of each of `n` training samples (in the listing's order) in the prepared
    training split: a permutation drawn from `seed`, apart from the hold-out's draw."""
    return np.random.default_rng([seed, 1]).permutation(n)
