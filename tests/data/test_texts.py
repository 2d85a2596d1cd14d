"""The `table` reader of labelled_texts datasets (pipeline/data/texts.py): CSV and JSON Lines,
labels, the word index, the vocabulary cap, the seeded split, the stats, and bad inputs through
the real `pipeline preprocess` command."""

import csv
import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from support.processes import run_pipeline
from support.project import ROOT

from pipeline.config.loading.loader import load_params
from pipeline.data import splits, texts
from pipeline.errors import DataError
from pipeline.kinds.labelled_texts import TextTablePreprocessConfig

TOPICS = ["sport", "business", "tech"]


def write_notes_params(folder: Path) -> Path:
    """A params.yaml declaring the one dataset `notes` in every section: Reuters' sections, its
    preprocess section the `table` reader's (and no dvc.yaml beside it)."""
    shipped = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw = {section: {"notes": datasets["reuters"]} for section, datasets in shipped.items() if section != "add"}
    raw["preprocess"]["notes"] = {
        "kind": "labelled_texts",
        "reader": "table",
        "text_column": "text",
        "label_column": "label",
        "num_words": None,
        "max_len": 12,
        "padding": "pre",
        "truncating": "pre",
        "test_split": 0.2,
        "split_seed": 113,
        "validation_split": 0.1,
        "validation_seed": 7,
        "stratify": False,
    }
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def cfg(tmp_path_factory) -> TextTablePreprocessConfig:
    preprocess = load_params(write_notes_params(tmp_path_factory.mktemp("params")), "notes").preprocess
    assert isinstance(preprocess, TextTablePreprocessConfig)
    return preprocess


def rows(n: int = 60) -> list[dict]:
    """Texts of a topic each: its topic's word, common words, and a word no other text has."""
    out = []
    for i in range(n):
        topic = TOPICS[i % 3]
        text = f'The {topic}word said, "news" of-the day: uniq{i}'
        out.append({"id": i, "text": text + " again" * (i % 7), "label": topic})
    return out


def write_table(folder: Path, records: list[dict], fmt: str = "csv") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"notes.{fmt}"
    if fmt == "csv":
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(records[0]))
            writer.writeheader()
            writer.writerows(records)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def prepared(tmp_path: Path, cfg, records=None, fmt="csv"):
    """({split: (x, y)}, stats.json, {the word index's file name: the index}) of what
    preprocess prepares of a table of `records`."""
    out = tmp_path / f"prepared-{fmt}"
    found = texts.prepare(write_table(tmp_path / fmt, records or rows(), fmt).parent, out, cfg, "preprocess.notes")
    splits = {split: found.head(split, 10**6) for split in found.splits}
    assets = {texts.WORD_INDEX_NAME: json.loads((out / texts.WORD_INDEX_NAME).read_text())}
    return splits, json.loads((out / "stats.json").read_text()), assets


def decoded(x: np.ndarray, word_index: dict) -> list[list[str]]:
    return [t.split() for t in texts.texts(x, word_index, texts.INDEX_FROM)]


def test_csv_and_jsonl_give_the_same_splits(tmp_path, cfg):
    from_csv = prepared(tmp_path, cfg, fmt="csv")
    from_jsonl = prepared(tmp_path, cfg, fmt="jsonl")
    for split in ("train", "val", "test"):
        assert np.array_equal(from_csv[0][split][0], from_jsonl[0][split][0])
        assert np.array_equal(from_csv[0][split][1], from_jsonl[0][split][1])
    same = {k: v for k, v in from_csv[1].items() if k != "shards"}
    assert same == {k: v for k, v in from_jsonl[1].items() if k != "shards"} and from_csv[2] == from_jsonl[2]
    assert [s["sha256"] for s in from_csv[1]["shards"]["train"]] == [
        s["sha256"] for s in from_jsonl[1]["shards"]["train"]
    ]
    # the quoted comma and quotes of the CSV were read as the text's own
    assert {"said", "news", "of", "the", "day"} <= set(from_csv[2][texts.WORD_INDEX_NAME])


@pytest.mark.parametrize(
    "labels,names",
    [
        (TOPICS, ["business", "sport", "tech"]),
        ([2, 10, 1], ["1", "2", "10"]),  # integers sort as numbers
        (["b", 7, "a"], ["7", "a", "b"]),
    ],
)
def test_labels_as_ints_or_strings_become_sorted_class_names(tmp_path, cfg, labels, names):
    records = [{**r, "label": labels[i % 3]} for i, r in enumerate(rows())]
    splits, stats, assets = prepared(tmp_path, dataclasses.replace(cfg, max_len=20), records, fmt="jsonl")
    assert stats["class_names"] == names and stats["num_classes"] == 3
    word_index = assets[texts.WORD_INDEX_NAME]
    for x, y in splits.values():
        assert y.dtype == np.int32
        for seq_words, label in zip(decoded(x, word_index), y):
            # the text's topic word says which of `labels` it was given
            topic = next(w for w in seq_words if w.endswith("word"))
            assert str(labels[TOPICS.index(topic[: -len("word")])]) == names[label]


def test_the_word_index_is_built_from_the_training_split_only(tmp_path, cfg):
    splits, stats, assets = prepared(tmp_path, dataclasses.replace(cfg, max_len=20))
    word_index = assets[texts.WORD_INDEX_NAME]
    assert sorted(word_index.values()) == list(range(1, len(word_index) + 1))
    # ids run to the rarest word's, len(word_index) + INDEX_FROM: the vocabulary is one more
    assert stats["vocab_size"] == len(word_index) + texts.INDEX_FROM + 1
    # each text's own word: those of the training texts only
    assert sum(w.startswith("uniq") for w in word_index) == stats["samples"]["train"]
    x_train = splits["train"][0]
    assert not (x_train == texts.OOV).any()
    for split in ("val", "test"):
        x = splits[split][0]
        assert len(x) > 0 and ((x == texts.OOV).sum(axis=1) == 1).all()
        assert not any(w.startswith("uniq") for seq in decoded(x, word_index) for w in seq)
    # ranked by count: "the" is twice in every text, "said" once
    assert word_index["the"] < word_index["said"]


def test_num_words_caps_the_vocabulary_marking_rare_words_out_of_vocabulary(tmp_path, cfg):
    # "alpha" in every text, "beta" in every other one, "gamma" in every third
    records = [
        {"text": "alpha" + " beta" * (i % 2 == 0) + " gamma" * (i % 3 == 0), "label": TOPICS[i % 3]} for i in range(60)
    ]
    splits, stats, assets = prepared(tmp_path, dataclasses.replace(cfg, num_words=6), records)
    word_index = assets[texts.WORD_INDEX_NAME]
    assert [word_index[w] for w in ("alpha", "beta", "gamma")] == [1, 2, 3]
    assert stats["vocab_size"] == 6
    ids = np.concatenate([x.ravel() for x, _ in splits.values()])
    # padding, start, out-of-vocabulary; alpha (1 + 3) and beta (2 + 3); gamma (6) is past the cap
    assert set(ids.tolist()) == {texts.PAD, texts.START, texts.OOV, 4, 5}
    _, uncapped, _ = prepared(tmp_path / "uncapped", cfg, records)
    assert uncapped["vocab_size"] == 3 + texts.INDEX_FROM + 1  # gamma's id, 6, is in it


def test_the_split_is_seeded_and_deterministic(tmp_path, cfg):
    first, stats, _ = prepared(tmp_path / "a", cfg)
    again, _, _ = prepared(tmp_path / "b", cfg)
    for split in ("train", "val", "test"):
        assert np.array_equal(first[split][0], again[split][0]) and np.array_equal(first[split][1], again[split][1])
    assert stats["samples"] == {"train": 43, "val": 5, "test": 12}  # 60: 48 + 12, 10 % of 48 held out
    other_seed, _, _ = prepared(tmp_path / "c", dataclasses.replace(cfg, split_seed=114))
    assert not np.array_equal(other_seed["test"][0], first["test"][0])
    # another validation seed moves samples between train and validation, not test
    other_val, _, _ = prepared(tmp_path / "d", dataclasses.replace(cfg, validation_seed=8))
    assert np.array_equal(other_val["test"][0], first["test"][0])
    assert not np.array_equal(other_val["val"][0], first["val"][0])


def test_stats_keys_and_values(tmp_path, cfg):
    splits, stats, assets = prepared(tmp_path, cfg)
    assert set(stats) == {
        "format",
        "shape",
        "shards",
        "input",
        "num_classes",
        "class_names",
        "vocab_size",
        "max_len",
        "samples",
        "class_counts",
        "length_mean",
        "length_max",
        "truncated_fraction",
        "encoding",
        "word_index",
    }
    assert stats["input"] == "sequences" and stats["word_index"] == texts.WORD_INDEX_NAME
    assert set(assets) == {texts.WORD_INDEX_NAME}
    assert stats["encoding"] == {"index_from": 3, "skip_top": 0, "padding": "pre", "truncating": "pre"}
    assert stats["max_len"] == 12 and all(x.shape[1] == 12 and x.dtype == np.int32 for x, _ in splits.values())
    assert sum(stats["samples"].values()) == 60
    assert np.sum([stats["class_counts"][s] for s in ("train", "val", "test")], axis=0).tolist() == [20, 20, 20]
    # the start mark and 8 words, plus up to 6 "again": texts longer than 12 are truncated, not dropped
    assert stats["length_max"] == 15
    truncated = sum(9 + i % 7 > 12 for i in range(60))
    assert stats["truncated_fraction"] == pytest.approx(truncated / 60)
    x = np.concatenate([x for x, _ in splits.values()])
    assert ((x != texts.PAD).all(axis=1) & (x[:, 0] != texts.START)).sum() == truncated  # cut on the left


# --------------------------------------------------------------------------- through the CLI

NOT_UTF8 = "text,label\nsome news,sport\ncaf\xe9 news,tech\n".encode("latin-1")
BAD_INPUTS: dict[str, tuple[bytes, str]] = {
    "no label column": (b"text,topic\nsome news,sport\nmore news,tech\n", ":2: no column 'label'"),
    "not UTF-8": (NOT_UTF8, ":3: not UTF-8 text"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_tables_fail_with_one_error_line_and_no_output(tmp_path, case):
    content, says = BAD_INPUTS[case]
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "notes.csv").write_bytes(content)
    params = write_notes_params(tmp_path)
    out = tmp_path / "prepared"
    done = run_pipeline("preprocess", "notes", "--raw", raw, "--out", out, "--params", params, cwd=tmp_path)
    lines = done.stderr.splitlines()
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1 and lines[0].startswith(f"error: {raw / 'notes.csv'}{says}"), done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()


def test_the_table_must_be_one_file(tmp_path, cfg):
    write_table(tmp_path, rows(), "csv")
    write_table(tmp_path, rows(), "jsonl")
    says = (
        r"expected one \.csv or \.jsonl file of labelled texts \(in it, or in a folder in it\), "
        r"found 2: notes\.csv, notes\.jsonl$"
    )
    with pytest.raises(DataError, match=says):
        texts.prepare(tmp_path, tmp_path / "out", cfg, "preprocess.notes")
    assert not (tmp_path / "out").exists()


def test_a_table_in_a_folder_of_the_download_is_found(tmp_path, cfg, caplog):
    """A file:// URL that names a folder is copied into the download folder as a folder of its
    own (data/raw/NAME/FOLDER/): its table is found there, what an OS leaves passed over."""
    path = write_table(tmp_path / "raw" / "exports", rows(), "csv")
    (path.parent / "._notes.csv").write_bytes(b"\0\5\26\7 resource fork")
    (tmp_path / "raw" / "__MACOSX").mkdir()
    (tmp_path / "raw" / "__MACOSX" / "notes.csv").write_bytes(b"text,label\n")
    with caplog.at_level("INFO", logger="pipeline"):
        found = texts.prepare(tmp_path / "raw", tmp_path / "out", cfg, "preprocess.notes")
    assert sum(s.samples for s in found.splits.values()) == 60
    assert texts.find_table(tmp_path / "raw") == path
    assert f"{tmp_path / 'raw'}: passed over 1 file an operating system leaves (._*): not samples" in caplog.messages


def test_tables_both_beside_and_in_a_folder_are_two(tmp_path, cfg):
    write_table(tmp_path / "raw", rows(), "csv")
    write_table(tmp_path / "raw" / "exports", rows(), "jsonl")
    says = "found 2: exports/notes.jsonl, notes.csv"
    with pytest.raises(DataError, match=says):
        texts.prepare(tmp_path / "raw", tmp_path / "out", cfg, "preprocess.notes")
    assert not (tmp_path / "out").exists()


def test_what_an_operating_system_leaves_beside_the_table_is_passed_over(tmp_path, cfg, caplog):
    path = write_table(tmp_path / "raw", rows(), "csv")
    (path.parent / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (path.parent / "._notes.csv").write_bytes(b"\0\5\26\7 resource fork")  # macOS' copy to a USB stick
    (path.parent / "Thumbs.db").write_bytes(b"\xd0\xcf\x11\xe0")
    with caplog.at_level("INFO", logger="pipeline"):
        found = texts.prepare(path.parent, tmp_path / "out", cfg, "preprocess.notes")
    assert sum(s.samples for s in found.splits.values()) == 60
    line = f"{path.parent}: passed over 3 files an operating system leaves (.DS_Store, ._*, Thumbs.db): not samples"
    assert line in caplog.messages


@pytest.mark.parametrize(
    "labels,names",
    [
        (["1", "01", "2", "001", "-1", "+1"], ["-1", "+1", "001", "01", "1", "2"]),  # equal as numbers: by text
        (["1.0", "1", "2"], ["1", "1.0", "2"]),  # not every one an integer: as text
        (["²", "1"], ["1", "²"]),  # a digit to str.isdigit, not to int(): as text
    ],
)
def test_labels_equal_as_numbers_are_distinct_classes_in_one_order(labels, names):
    assert texts.class_order(set(labels)) == names


def test_the_class_order_does_not_depend_on_the_hash_seed():
    from support.processes import run_python, subprocess_env

    code = "from pipeline.data import texts; print(texts.class_order({'1', '01', '001', '2', '02'}))"
    found = {run_python(code, env=subprocess_env(PYTHONHASHSEED=seed)).stdout for seed in ("1", "2", "3")}
    assert found == {"['001', '01', '1', '02', '2']\n"}


def test_a_table_with_a_column_or_key_twice_is_refused_naming_it(tmp_path, cfg):
    raw = tmp_path / "csv"
    raw.mkdir()
    (raw / "notes.csv").write_text("text,label,label\nsome news,sport,tech\n", encoding="utf-8")
    with pytest.raises(DataError) as caught:
        texts.prepare(raw, tmp_path / "out", cfg, "preprocess.notes")
    assert str(caught.value) == f"{raw / 'notes.csv'}:1: two columns named 'label'; expected each column once"
    raw = tmp_path / "jsonl"
    raw.mkdir()
    (raw / "notes.jsonl").write_text('{"text": "a b", "label": "x"}\n{"text": "c", "label": "x", "label": "y"}\n')
    with pytest.raises(DataError) as caught:
        texts.prepare(raw, tmp_path / "out", cfg, "preprocess.notes")
    assert str(caught.value) == f"{raw / 'notes.jsonl'}:2: two keys named 'label'; expected each key once"


def imbalanced_rows() -> list[dict]:
    """70 texts: 40 of sport, 27 of business, and 3 of a rare topic, spread through the file."""
    topics = ["sport"] * 40 + ["business"] * 27
    for place in (11, 35, 60):
        topics.insert(place, "rare")
    return [{"text": f"the {topic}word said uniq{i}", "label": topic} for i, topic in enumerate(topics)]


def test_a_stratified_split_keeps_a_rare_class_in_every_split(tmp_path, cfg):
    """A random draw of 20% for testing and 10% of the rest for validation leaves the rare
    class (3 of 70 texts) out of the validation split with these seeds; drawn class by class,
    each split holds one of its texts, and each class is split in proportion."""
    classes = ["business", "rare", "sport"]
    _, drawn, _ = prepared(tmp_path / "random", cfg, imbalanced_rows())
    assert drawn["class_names"] == classes
    assert drawn["class_counts"]["val"][1] == 0  # the rare class: none to validate on
    splits, stats, _ = prepared(tmp_path / "stratified", dataclasses.replace(cfg, stratify=True), imbalanced_rows())
    counts = stats["class_counts"]
    # test: round(0.2 x 27) = 5, at least 1 of 3, round(0.2 x 40) = 8; validation of the rest
    # (22, 2, 32): round(2.2) = 2, at least 1 of 2 (never both), round(3.2) = 3
    assert counts == {"train": [20, 1, 29], "val": [2, 1, 3], "test": [5, 1, 8]}
    assert sum(stats["samples"].values()) == 70  # every text is in a split: none dropped
    again, _, _ = prepared(tmp_path / "again", dataclasses.replace(cfg, stratify=True), imbalanced_rows())
    for split in ("train", "val", "test"):
        assert np.array_equal(splits[split][0], again[split][0]) and np.array_equal(splits[split][1], again[split][1])
    # a class of one text keeps it for training; of two, one is tested and none validated
    few = [r for r in imbalanced_rows() if r["label"] != "rare" or r["text"].endswith("uniq11")]
    assert prepared(tmp_path / "one", dataclasses.replace(cfg, stratify=True), few)[1]["class_counts"]["train"][1] == 1
    two = [r for r in imbalanced_rows() if not r["text"].endswith("uniq60")]
    counts = prepared(tmp_path / "two", dataclasses.replace(cfg, stratify=True), two)[1]["class_counts"]
    assert [counts[split][1] for split in ("train", "val", "test")] == [1, 0, 1]


def test_the_stratified_test_share_is_the_last_of_each_class_in_the_seeded_shuffle():
    """As the random split tests the last share of the shuffled order, the stratified one
    tests the last samples of each class in it; the rest keep that order."""
    labels = np.array([0] * 8 + [1] * 2)
    cfg = SimpleNamespace(test_split=0.25, split_seed=3, validation_split=0.0, validation_seed=7)
    shuffled = np.arange(10)
    np.random.RandomState(3).shuffle(shuffled)
    order, n_train_all, train_idx, val_idx = splits.split_order(10, cfg, labels)
    assert n_train_all == 7 and val_idx.tolist() == [] and train_idx.tolist() == list(range(7))
    zeros, ones = [i for i in shuffled if labels[i] == 0], [i for i in shuffled if labels[i] == 1]
    assert sorted(order[7:].tolist()) == sorted([*zeros[-2:], ones[-1]])  # round(0.25 x 8) = 2; 1 of 2
    assert order[:7].tolist() == [i for i in shuffled if i not in order[7:]]
    assert [i for i in shuffled if i in order[7:]] == order[7:].tolist()
    # without labels: the split it always was (Reuters' is Keras')
    plain = splits.split_order(10, cfg)
    assert plain[0].tolist() == shuffled.tolist() and plain[1] == int(10 * 0.75)
