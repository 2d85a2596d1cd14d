"""The prepared-data format shared by preprocess, train, evaluate and the tools: shards of
fixed-length records and the folder's description, each kind's facts in it."""

import dataclasses
import json
import re

import numpy as np
import pytest
import yaml
from support.project import ROOT

from pipeline.data import prepared
from pipeline.errors import DataError
from pipeline.io import write_json
from pipeline.kinds.image_folders import ImageFoldersFacts
from pipeline.kinds.known import FORMS
from pipeline.kinds.labelled_texts import LabelledTextsFacts, TextEncoding, full_length_facts
from pipeline.kinds.tables import CategoricalColumn, NumericColumn, TableFacts

FACTS = full_length_facts(3, 90)


def splits_of(n=10, width=3):
    x = np.arange(n * width, dtype=np.int32).reshape(n, width)
    y = np.arange(n, dtype=np.int32) % 4
    return {"train": (x[:6], y[:6]), "val": (x[6:8], y[6:8]), "test": (x[8:], y[8:])}


def write(folder, splits=None, facts=FACTS):
    return prepared.write_arrays(
        folder, splits or splits_of(), input_="sequences", class_names=["a", "b", "c", "d"], facts=facts
    )


def test_prepared_folder_round_trips(tmp_path):
    write(tmp_path / "out")
    found = prepared.read(tmp_path / "out")
    assert (found.input, found.shape, found.num_classes, found.facts) == ("sequences", (3,), 4, FACTS)
    for name, (x, y) in splits_of().items():
        got_x, got_y = found.head(name, 100)
        assert np.array_equal(got_x, x) and np.array_equal(got_y, y) and got_y.dtype == np.int32
        assert found.samples(name) == len(y)
        assert found.split(name).class_counts == np.bincount(y, minlength=4).tolist()
    found.check(*prepared.SPLITS)
    assert found.head("train", 2)[0].tolist() == splits_of()["train"][0][:2].tolist()


def test_samples_given_in_any_order_are_written_in_their_places(tmp_path, monkeypatch):
    monkeypatch.setattr(prepared, "SHARD_BYTES", 3 * 16)  # three records of four int32 a shard
    with prepared.Writer(tmp_path / "out") as writer:
        split = writer.split("train", 8, (3,), "sequences", 4)
        for place in (5, 0, 7, 2, 1, 6, 3, 4):
            split.add(place, place % 4, np.full(3, place, np.int32))
        done = split.close()
        writer.finish({"train": done}, input_="sequences", shape=(3,), class_names=list("abcd"), facts=FACTS)
    found = prepared.read(tmp_path / "out")
    assert [s.samples for s in found.split("train").shards] == [3, 3, 2]
    x, y = found.head("train", 8)
    assert x[:, 0].tolist() == list(range(8)) and y.tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "stats.json",
        "train-00000-of-00003.bin",
        "train-00001-of-00003.bin",
        "train-00002-of-00003.bin",
    ]


def test_a_failed_write_leaves_the_previous_folder(tmp_path):
    write(tmp_path / "out", facts=dataclasses.replace(FACTS, vocab_size=1))
    with pytest.raises(TypeError):
        write(tmp_path / "out", facts=dataclasses.replace(FACTS, encoding=object()))  # type: ignore[arg-type]  # not JSON
    assert prepared.read(tmp_path / "out").facts.vocab_size == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_shard_missing_cut_short_or_corrupt_is_named(tmp_path):
    write(tmp_path / "out")
    found = prepared.read(tmp_path / "out")
    shard = tmp_path / "out" / found.split("train").shards[0].file
    whole = shard.read_bytes()
    shard.write_bytes(whole[:-5])
    with pytest.raises(
        DataError, match=rf"^{shard}: cut short \(91 bytes, expected 96\); run the preprocess stage again$"
    ):
        found.check("train")
    shard.write_bytes(whole[:-1] + bytes([whole[-1] ^ 1]))
    with pytest.raises(DataError, match=rf"^{shard}: corrupt \(sha256 [0-9a-f]{{64}}, stats.json records "):
        found.check("train")
    found.check("train", digests=False)  # the size alone: a flipped bit passes
    shard.unlink()
    with pytest.raises(DataError, match=rf"^{shard}: missing; run the preprocess stage again$"):
        found.check("train")


def test_a_description_of_another_format_or_none_is_named(tmp_path):
    with pytest.raises(DataError, match=r"stats\.json: missing; run the preprocess stage first"):
        prepared.read(tmp_path)
    (tmp_path / "stats.json").write_text(json.dumps({"input": "sequences", "num_classes": 4}))
    with pytest.raises(DataError, match=r"expected prepared data of format .*got None \(an older version wrote it\)"):
        prepared.read(tmp_path)
    write(tmp_path / "out")
    raw = json.loads((tmp_path / "out" / "stats.json").read_text())
    raw["samples"]["train"] = 7
    (tmp_path / "out" / "stats.json").write_text(json.dumps(raw))
    with pytest.raises(DataError, match=r"train: its shards hold another number of samples than 7"):
        prepared.read(tmp_path / "out")
    del raw["shards"]
    (tmp_path / "out" / "stats.json").write_text(json.dumps(raw))
    with pytest.raises(DataError, match=r"not a prepared folder's description \(KeyError: 'shards'\)"):
        prepared.read(tmp_path / "out")


def test_the_digest_is_of_the_samples_not_the_shards(tmp_path, monkeypatch):
    write(tmp_path / "one")
    monkeypatch.setattr(prepared, "SHARD_BYTES", 16)
    write(tmp_path / "many")
    one, many = prepared.read(tmp_path / "one"), prepared.read(tmp_path / "many")
    assert len(many.split("train").shards) == 6 and len(one.split("train").shards) == 1
    assert one.digest("train")[0] == many.digest("train")[0]
    assert one.digest("train")[1].tolist() == splits_of()["train"][1].tolist()
    assert one.digest("train")[0] != one.digest("val")[0]
    assert one.shards_digest("train") != many.shards_digest("train")


def test_balanced_class_weights_are_n_over_classes_times_count(tmp_path):
    y = np.array([0] * 6 + [1] * 3 + [2] * 1 + [3] * 2, dtype=np.int32)
    x = np.zeros((len(y), 3), np.int32)
    found = write(tmp_path / "out", {"train": (x, y), "val": (x[:2], y[[0, 6]])})
    weights = found.class_weights("train")
    assert weights == pytest.approx([12 / (4 * 6), 12 / (4 * 3), 12 / (4 * 1), 12 / (4 * 2)])
    # the description's counts are those of the labels in the shards
    assert found.split("train").class_counts == np.bincount(found.digest("train")[1], minlength=4).tolist()
    sklearn = pytest.importorskip("sklearn.utils.class_weight")  # scikit-learn's own "balanced"
    assert weights == pytest.approx(sklearn.compute_class_weight("balanced", classes=np.arange(4), y=y).tolist())
    # a class the split lacks has no such weight: one error naming it, not a silent 0
    lacking = r"stats\.json: class 'c' \(and 1 more\) has no sample in the val split.*stratify: true"
    with pytest.raises(DataError, match=lacking):
        found.class_weights("val")


# --------------------------------------------------------------------------- each kind's facts

TEXTS = LabelledTextsFacts(
    vocab_size=90,
    max_len=3,
    length_mean=4.5,
    length_max=9,
    truncated_fraction=0.25,
    encoding=TextEncoding(index_from=3, padding="pre", skip_top=0, truncating="post"),
    word_index="word_index.json",
)
PICTURES = ImageFoldersFacts(image_size=3, color="grey", reader="digits", images_sha256="ab" * 32)
TABLE = TableFacts(
    columns=[
        NumericColumn("age", mean=40.0, missing=2),
        CategoricalColumn("colour", ["red", "blue"], seen=3, unseen={"train": 0, "val": 1, "test": 0}, missing=0),
        NumericColumn("height", mean=2, missing=0),  # a whole number as JSON holds it, kept as it is
    ],
    label_column="label",
    ignored=["id"],
)
# each kind's facts as stats.json holds them beside the common keys (what the readers wrote
# before the facts were typed: the same keys and values, each level's keys sorted)
WRITTEN = {
    "sequences": {
        "encoding": {"index_from": 3, "padding": "pre", "skip_top": 0, "truncating": "post"},
        "length_max": 9,
        "length_mean": 4.5,
        "max_len": 3,
        "truncated_fraction": 0.25,
        "vocab_size": 90,
        "word_index": "word_index.json",
    },
    "images": {"color": "grey", "image_size": 3, "images_sha256": "ab" * 32, "reader": "digits"},
    "table_rows": {
        "columns": [
            {"mean": 40.0, "missing": 2, "name": "age", "type": "numeric"},
            {
                "categories": ["red", "blue"],
                "missing": 0,
                "name": "colour",
                "seen": 3,
                "type": "categorical",
                "unseen": {"test": 0, "train": 0, "val": 1},
            },
            {"mean": 2, "missing": 0, "name": "height", "type": "numeric"},
        ],
        "ignored": ["id"],
        "label_column": "label",
    },
}


def of_kind(folder, input_, facts):
    """A prepared folder of `input_`'s form (3 values a sample) with these facts."""
    x = np.arange(30, dtype=FORMS[input_].dtype).reshape(10, 3)
    y = np.arange(10) % 2
    splits = {"train": (x[:6], y[:6]), "val": (x[6:8], y[6:8]), "test": (x[8:], y[8:])}
    return prepared.write_arrays(folder, splits, input_=input_, class_names=["a", "b"], facts=facts)


@pytest.mark.parametrize("input_,facts", [("sequences", TEXTS), ("images", PICTURES), ("table_rows", TABLE)])
def test_each_kinds_facts_are_read_and_written_again_byte_for_byte(tmp_path, input_, facts):
    of_kind(tmp_path / "out", input_, facts)
    written = (tmp_path / "out" / prepared.DESCRIPTION).read_text()
    raw = json.loads(written)
    assert {k: v for k, v in raw.items() if k not in prepared.COMMON_KEYS} == WRITTEN[input_]
    assert written == json.dumps(raw, indent=2, sort_keys=True) + "\n"
    found = prepared.read(tmp_path / "out")
    assert found.facts == facts and type(found.facts) is FORMS[input_].facts
    write_json(tmp_path / "again.json", found.to_json())
    assert (tmp_path / "again.json").read_text() == written


@pytest.mark.parametrize(
    "input_,facts,change,message",
    [
        ("sequences", TEXTS, {"vocab_size": None}, r"vocab_size: missing"),
        ("sequences", TEXTS, {"colour": "red"}, r"colour: unknown \(expected vocab_size, max_len, length_mean, "),
        ("sequences", TEXTS, {"vocab_size": True}, r"vocab_size: expected an integer, got True"),
        ("sequences", TEXTS, {"length_mean": "4.5"}, r"length_mean: expected a number, got '4.5'"),
        ("sequences", TEXTS, {"encoding": {"index_from": 3}}, r"encoding.padding: missing"),
        ("sequences", TEXTS, {"encoding": [3]}, r"encoding: expected a mapping, got \[3\]"),
        ("images", PICTURES, {"color": "blue"}, r"color: expected 'grey' or 'rgb', got 'blue'"),
        ("images", PICTURES, {"images_sha256": 7}, r"images_sha256: expected a string, got 7"),
        ("table_rows", TABLE, {"ignored": "id"}, r"ignored: expected a list, got 'id'"),
        ("table_rows", TABLE, {"columns": [{"name": "d", "type": "date"}]}, r"columns\[0\]: expected a mapping whose"),
        ("table_rows", TABLE, {"columns": [{"name": "a", "type": "numeric"}]}, r"columns\[0\].mean: missing"),
    ],
)
def test_a_fact_missing_unknown_or_not_of_its_type_is_one_error_naming_the_key(
    tmp_path, input_, facts, change, message
):
    of_kind(tmp_path, input_, facts)
    path = tmp_path / prepared.DESCRIPTION
    raw = json.loads(path.read_text())
    raw.update(change)
    path.write_text(json.dumps({k: v for k, v in raw.items() if v is not None}))  # None: the key left out
    with pytest.raises(DataError) as caught:
        prepared.read(tmp_path)
    assert "\n" not in str(caught.value) and str(caught.value).endswith("; run the preprocess stage again")
    assert caught.match(rf"^{re.escape(str(path))}: {message}")


def test_what_every_reader_writes_is_read_and_written_again_byte_for_byte(tmp_path):
    """DVC hashes the prepared folders: each reader's description, read and written again, is
    the same file."""
    from support.datasets import make_mnist_archive, make_reuters_raw

    from pipeline.data import images, mnist, reuters, tabular, texts
    from pipeline.kinds.image_folders import ImageFoldersPreprocessConfig
    from pipeline.kinds.labelled_texts import ReutersPreprocessConfig, TextTablePreprocessConfig
    from pipeline.kinds.tables import TablePreprocessConfig

    shipped = yaml.safe_load((ROOT / "params.yaml").read_text())
    sections = {**shipped["preprocess"], **{name: t["preprocess"] for name, t in shipped["add"].items()}}
    pictures = ImageFoldersPreprocessConfig(**{**sections["mnist"], "images_sha256": None})
    make_mnist_archive(folder(tmp_path / "mnist") / "mnist.tar.gz")
    rows = [(f"news {'of ' * (i % 5)}day {i}", "ab"[i % 2], ["red", "blue", ""][i % 3]) for i in range(30)]
    notes = "text,label\n" + "".join(f"{text},{label}\n" for text, label, _ in rows)
    (folder(tmp_path / "notes") / "notes.csv").write_text(notes)
    shop = "id,age,colour,label\n" + "".join(f"{i},{i % 7},{c},{label}\n" for i, (_, label, c) in enumerate(rows))
    (folder(tmp_path / "shop") / "shop.csv").write_text(shop)
    written = [
        reuters.prepare(
            make_reuters_raw(tmp_path / "reuters", n=100),
            tmp_path / "p1",
            ReutersPreprocessConfig(**sections["reuters"]),
            "r",
        ),
        mnist.prepare(tmp_path / "mnist", tmp_path / "p2", pictures, "m"),
        images.prepare(
            tmp_path / "mnist", tmp_path / "p3", dataclasses.replace(pictures, reader="folders", color="rgb"), "i"
        ),
        texts.prepare(
            tmp_path / "notes",
            tmp_path / "p4",
            TextTablePreprocessConfig(**{**sections["labelled_texts"], "max_len": 4}),
            "n",
        ),
        tabular.prepare(
            tmp_path / "shop",
            tmp_path / "p5",
            TablePreprocessConfig(**{**sections["tables"], "categorical": ("colour",), "ignore": ("id",)}),
            "s",
        ),
    ]
    assert [found.input for found in written] == ["sequences", "images", "images", "sequences", "table_rows"]
    for found in written:
        write_json(tmp_path / "again.json", prepared.read(found.folder).to_json())
        assert (tmp_path / "again.json").read_bytes() == (found.folder / prepared.DESCRIPTION).read_bytes()


def folder(path):
    path.mkdir()
    return path
