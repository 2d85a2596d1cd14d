"""pipeline/data/splits.py: the seeded hold-outs, unstratified as they always were, or class by
class so that a rare class is in every split."""

import numpy as np

from pipeline.data import splits


def test_validation_hold_out_is_seeded_and_disjoint():
    train, val = splits.split_validation(100, 0.1, seed=3)
    assert len(val) == 10 and len(train) == 90 and not set(train) & set(val)
    assert np.array_equal(splits.split_validation(100, 0.1, seed=3)[1], val)
    assert not np.array_equal(splits.split_validation(100, 0.1, seed=4)[1], val)


def test_the_unstratified_hold_out_is_the_one_it_always_was():
    """MNIST's and the tests' splits rely on it: the first round(n x fraction) of the seeded
    permutation, whatever the classes."""
    perm = np.random.RandomState(7).permutation(1000)
    train, val = splits.split_validation(1000, 0.1, 7)
    assert val.tolist() == sorted(perm[:100].tolist()) and train.tolist() == sorted(perm[100:].tolist())


def test_class_quotas_hold_out_each_class_in_proportion_never_all_of_one():
    counts = np.array([50, 30, 3, 2, 1, 0])
    assert splits.class_quotas(counts, 0.1).tolist() == [5, 3, 1, 1, 0, 0]  # 0.3 and 0.2 -> 1
    assert splits.class_quotas(counts, 0.5).tolist() == [25, 15, 2, 1, 0, 0]  # 1.5 -> 2 (half to even)
    assert splits.class_quotas(counts, 0.9).tolist() == [45, 27, 2, 1, 0, 0]  # 2.7 -> 2, 1.8 -> 1: one stays
    assert splits.class_quotas(counts, 0.0).tolist() == [0] * 6  # no hold-out, not even of a class of 2


def test_a_stratified_hold_out_keeps_a_rare_class_on_both_sides():
    """Of 60 samples, a class of 3: a hold-out of 10% drawn at random leaves it out of the
    validation share (this seed), the stratified one holds one of them out and trains on two."""
    labels = np.array([0] * 30 + [1] * 27 + [2] * 3)
    rng = np.random.RandomState(0)
    rng.shuffle(labels)
    _, val = splits.split_validation(len(labels), 0.1, 7)
    assert 2 not in labels[val]
    train, val = splits.split_validation(len(labels), 0.1, 7, labels)
    assert np.bincount(labels[val]).tolist() == [3, 3, 1] and np.bincount(labels[train]).tolist() == [27, 24, 2]
    assert sorted([*train, *val]) == list(range(60)) and train.tolist() == sorted(train)
    # seeded: the same draw again, another with another seed (the same counts)
    assert splits.split_validation(len(labels), 0.1, 7, labels)[1].tolist() == val.tolist()
    other = splits.split_validation(len(labels), 0.1, 8, labels)[1]
    assert other.tolist() != val.tolist() and np.bincount(labels[other]).tolist() == [3, 3, 1]


def test_held_out_by_class_takes_each_class_first_samples_in_the_order_given():
    labels = np.array([1, 0, 1, 1, 0, 0, 0, 2])
    held = splits.held_out_by_class(labels, 0.5)
    # class 0: 4 samples, 2 held (its first two: places 1 and 4); class 1: 3 -> round(1.5) = 2
    # (places 0 and 2); class 2: 1 sample, kept
    assert np.flatnonzero(held).tolist() == [0, 1, 2, 4]
    assert splits.held_out_by_class(np.zeros(0, np.int64), 0.5).tolist() == []
