"""pipeline/data/reuters.py: the reader `keras` of labelled texts (Keras' reuters.npz and word
index), with the encoding every dataset of texts shares (pipeline/data/texts.py)."""

import json

import numpy as np
import pytest
from support.datasets import make_reuters_npz, make_reuters_raw
from support.project import ROOT

from pipeline.config.loading.loader import load_params
from pipeline.data import reuters, texts
from pipeline.errors import DataError
from pipeline.kinds.labelled_texts import ReutersPreprocessConfig


@pytest.fixture(scope="module")
def cfg():
    preprocess = load_params(ROOT / "params.yaml", "reuters").preprocess
    assert isinstance(preprocess, ReutersPreprocessConfig)
    assert (preprocess.kind, preprocess.reader) == ("labelled_texts", "keras")
    return preprocess


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    folder = tmp_path_factory.mktemp("raw")
    make_reuters_npz(folder / "reuters.npz", n=200)
    return reuters.load_raw(folder)


def with_(cfg, **changes):
    import dataclasses

    return dataclasses.replace(cfg, **changes)


def test_pad_and_truncate_on_each_side():
    seqs = [np.array([1, 2, 3, 4, 5]), np.array([7])]
    assert texts.pad(seqs, 3, "pre", "pre").tolist() == [[3, 4, 5], [0, 0, 7]]
    assert texts.pad(seqs, 3, "post", "post").tolist() == [[1, 2, 3], [7, 0, 0]]
    assert texts.pad(seqs, 3, "pre", "post").tolist() == [[1, 2, 3], [0, 0, 7]]
    assert texts.pad(seqs, 3, "pre", "pre").dtype == np.int32


def test_split_follows_keras(raw, cfg):
    xs, ys = raw
    splits, classes, facts = reuters.split_and_pad(xs, ys, with_(cfg, max_len=500, validation_split=0.0))
    n_train = int(len(ys) * (1 - cfg.test_split))
    assert {k: len(v[1]) for k, v in splits.items()} == {"train": n_train, "val": 0, "test": len(ys) - n_train}
    # Keras: shuffle indices with RandomState(113), then 1 + (w + 3) for each word.
    order = np.arange(len(ys))
    np.random.RandomState(113).shuffle(order)
    first_test = order[n_train]
    expected = [1] + [w + 3 for w in xs[first_test]]
    row = splits["test"][0][0]
    assert row[-len(expected) :].tolist() == expected
    assert splits["test"][1][0] == ys[first_test]
    assert len(classes) == 46
    # the 46 topics in Keras' order name the classes; the word index is the reader's own file
    assert classes == list(reuters.LABELS) and classes[3] == "earn"
    assert facts.word_index == reuters.WORD_INDEX_NAME


def test_prepare_gives_the_splits_the_stats_and_keras_word_index(tmp_path, cfg):
    raw = make_reuters_raw(tmp_path / "raw", n=200)
    found = reuters.prepare(raw, tmp_path / "out", cfg, "preprocess.reuters")
    assert set(found.splits) == {"train", "val", "test"} and found.input == "sequences"
    assert found.shape == (cfg.max_len,) and sum(s.samples for s in found.splits.values()) == 200
    kept = json.loads((tmp_path / "out" / reuters.WORD_INDEX_NAME).read_text())
    assert kept == json.loads((raw / reuters.WORD_INDEX_NAME).read_text())
    # the splits keep Keras' order: what split_and_pad gives, record for record
    splits, _, _ = reuters.split_and_pad(*reuters.load_raw(raw), cfg)
    for name, (x, y) in splits.items():
        got_x, got_y = found.head(name, 1000)
        assert np.array_equal(got_x, x) and np.array_equal(got_y, y)
    (raw / reuters.WORD_INDEX_NAME).unlink()
    with pytest.raises(DataError, match=r"reuters_word_index.json: missing; run the download stage first"):
        reuters.prepare(raw, tmp_path / "again", cfg, "preprocess.reuters")
    assert not (tmp_path / "again").exists()


def test_fewer_labels_than_the_topics_are_named_by_their_number(cfg):
    xs = [np.array([5, 6, 7]), np.array([8, 9]), np.array([10]), np.array([11, 12])] * 5
    _, classes, facts = reuters.split_and_pad(xs, np.array([0, 1, 2, 1] * 5), cfg)
    assert classes == ["0", "1", "2"]


def test_validation_is_held_out_of_train_and_nothing_is_dropped(raw, cfg):
    xs, ys = raw
    splits, classes, facts = reuters.split_and_pad(xs, ys, cfg)
    assert sum(len(v[1]) for v in splits.values()) == len(ys)
    assert len(splits["val"][1]) == round(int(len(ys) * 0.8) * cfg.validation_split)
    train_rows = {tuple(r) for r in splits["train"][0]}
    assert not any(tuple(r) in train_rows for r in splits["val"][0])
    assert all(x.shape[1] == cfg.max_len for x, _ in splits.values())
    assert facts.truncated_fraction > 0  # the fixture has sequences longer than max_len


def test_vocabulary_cap_marks_out_of_vocabulary(raw, cfg):
    xs, ys = raw
    splits, classes, facts = reuters.split_and_pad(xs, ys, with_(cfg, num_words=50))
    everything = np.concatenate([x.ravel() for x, _ in splits.values()])
    assert everything.max() < 50
    assert (everything == texts.OOV).any()
    assert facts.vocab_size == 50


def test_whole_vocabulary_when_uncapped(raw, cfg):
    xs, ys = raw
    _, classes, facts = reuters.split_and_pad(xs, ys, cfg)
    assert facts.vocab_size == max(int(x.max()) for x in xs) + 3 + 1


def test_npz_without_expected_keys(tmp_path):
    np.savez(tmp_path / "reuters.npz", a=np.arange(3))
    with pytest.raises(DataError, match=r"reuters.npz: expected arrays 'x' and 'y', missing \['x', 'y'\]"):
        reuters.load_raw(tmp_path)


def test_not_an_npz(tmp_path):
    (tmp_path / "reuters.npz").write_bytes(b"<html>proxy login</html>")
    with pytest.raises(DataError, match="reuters.npz: not a readable .npz file"):
        reuters.load_raw(tmp_path)


def test_mismatched_lengths(tmp_path):
    x = np.empty(2, dtype=object)
    x[:] = [[1, 2], [3]]
    np.savez(tmp_path / "reuters.npz", x=x, y=np.array([1]))
    with pytest.raises(DataError, match="'x' has 2 items but 'y' has 1"):
        reuters.load_raw(tmp_path)
