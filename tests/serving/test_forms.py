"""The forms a served model reads: one registry that covers every form a kind of dataset
prepares, each form's columns, rows and example."""

import dataclasses
import io
import json
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from pipeline.data import prepared
from pipeline.errors import DataError
from pipeline.kinds import known as kinds
from pipeline.kinds.image_folders import ImageFoldersFacts
from pipeline.kinds.labelled_texts import TextEncoding, full_length_facts
from pipeline.kinds.tables import CategoricalColumn, NumericColumn, TableFacts
from pipeline.serving import forms


def test_every_form_a_kind_prepares_is_served_and_read():
    served = [forms.named(kind.form) for kind in kinds.KINDS.values()]
    assert len({type(form) for form in served}) == len(kinds.KINDS)  # one class each
    columns = [c for form in served for c in form.columns]
    assert len(columns) == len(set(columns))  # a request's column says its form (a table's are the user's)
    for form in served:
        if form.columns:
            assert [c.name for c in form.signature_columns({})] == list(form.columns)


def test_pictures_as_a_user_has_them_read_back_to_the_same_pixels(tmp_path):
    x = np.random.RandomState(0).randint(0, 256, (3, 6, 6, 3)).astype(np.uint8)
    data = prepared.write_arrays(
        tmp_path / "p", {"test": (x, np.zeros(3, np.uint8))}, input_="images", class_names=["a", "b"],
        facts=ImageFoldersFacts(6, "rgb", "folders", images_sha256=None),
    )  # fmt: skip
    rows = forms.of(data).raw_rows(data.head("test", 3)[0], data)
    assert [np.asarray(Image.open(io.BytesIO(r["image"]))).tolist() for r in rows] == x.tolist()
    settings = {"image_size": 6, "color": "rgb", "reader": "folders"}
    assert forms.of(data).settings(data, SimpleNamespace(input_shape=(None, 32, 32, 3))) == {
        **settings,
        "model_image_size": 32,
    }
    read = forms.named("images").inputs([("image", r["image"]) for r in rows], settings, None)
    assert np.array_equal(read, x)
    assert forms.of({"input": "images"}) is forms.named("images")


def test_texts_are_served_with_their_encoding_and_word_index(tmp_path):
    x = np.array([[0, 1, 4, 5], [1, 5, 5, 4]], np.int32)
    encoding = TextEncoding(index_from=3, padding="pre", skip_top=0, truncating="post")
    facts = dataclasses.replace(full_length_facts(4, 6, encoding), word_index="words.json")
    data = prepared.write_arrays(
        tmp_path / "p", {"test": (x, np.zeros(2, np.int32))}, input_="sequences", class_names=["a", "b"], facts=facts
    )
    (tmp_path / "p" / "words.json").write_text(json.dumps({"the": 1, "news": 2}))
    form = forms.of(data)
    settings = form.settings(data, None)
    # the encoding's keys in the order the description holds them (sorted), then the sizes
    assert list(settings["encoding"].items()) == [
        ("index_from", 3), ("padding", "pre"), ("skip_top", 0), ("truncating", "post"),
        ("max_len", 4), ("vocab_size", 6),
    ]  # fmt: skip
    assert form.artifacts(data) == {forms.WORD_INDEX_ARTIFACT: str(tmp_path / "p" / "words.json")}
    assert form.raw_rows(x, data) == [{"text": "the news"}, {"text": "news news the"}]
    random_ids = prepared.write_arrays(
        tmp_path / "r", {"test": (x, np.zeros(2, np.int32))}, input_="sequences", class_names=["a", "b"],
        facts=full_length_facts(4, 6),
    )  # fmt: skip
    with pytest.raises(DataError, match="no word index"):
        form.artifacts(random_ids)


def test_a_text_example_is_its_first_sixty_words():
    row = {"text": " ".join(f"w{i}" for i in range(100))}
    assert forms.named("sequences").example(row)["text"].split() == [f"w{i}" for i in range(60)]


@pytest.mark.parametrize(
    "value,message",
    [
        ([1, -2], "ids: expected a list of word ids (non-negative integers), got a negative value"),
        ([1.5], "ids: expected a list of word ids (non-negative integers), got a list of 1"),
        ("abc", "ids: expected a list of word ids (non-negative integers), got a str"),
    ],
)
def test_ids_that_are_not_word_ids_are_one_request_error(value, message):
    with pytest.raises(forms.RequestError) as caught:
        forms.integers(value, "ids", "a list of word ids (non-negative integers)", 1)
    assert caught.value.message == message


# --------------------------------------------------------------------------- a table's rows

TABLE = {
    "columns": [
        {"name": "age", "type": "numeric", "mean": 40.0},
        {"name": "colour", "type": "categorical", "categories": ["red", "blue"]},
    ],
    "ignored": ["id"],
}


def test_rows_of_the_users_columns_are_read_as_preprocess_wrote_them():
    import pandas as pd

    frame = pd.DataFrame(
        [
            {"id": 7, "age": 31, "colour": "blue"},
            {"id": 8, "age": None, "colour": "green"},  # missing number, unseen category
            {"id": 9, "age": "52.5", "colour": None},  # a number as text, missing category
        ]
    )
    x = forms.named("table_rows").read(frame, TABLE, None)
    assert x.dtype == np.float32
    assert x.tolist() == [[31.0, 3.0], [40.0, 1.0], [52.5, 0.0]]


@pytest.mark.parametrize(
    "row,message",
    [
        ({"age": "old", "colour": "red"}, "row 0: age: expected a number, got a str 'old'"),
        ({"age": True, "colour": "red"}, "row 0: age: expected a number, got a bool 'True'"),
        ({"age": 3}, "no column 'colour': expected the columns age, colour (null for a missing value)"),
        ({"age": 3, "colour": "red", "height": 2}, "unknown column 'height': expected the columns age, colour"),
    ],
)
def test_a_bad_row_is_one_request_error(row, message):
    import pandas as pd

    with pytest.raises(forms.RequestError) as caught:
        forms.named("table_rows").read(pd.DataFrame([row]), TABLE, None)
    assert caught.value.message == message


def test_a_tables_rows_go_back_to_the_users_values(tmp_path):
    x = np.array([[31.0, 3.0], [40.0, 0.0], [52.5, 1.0]], np.float32)
    data = prepared.write_arrays(
        tmp_path / "p", {"test": (x, np.zeros(3, np.int32))}, input_="table_rows", class_names=["a", "b"],
        facts=TableFacts(
            [
                NumericColumn("age", 40.0, missing=1),
                CategoricalColumn("colour", ["red", "blue"], seen=3, unseen={"test": 1}, missing=1),
            ],
            "label",
            ignored=["id"],
        ),
    )  # fmt: skip
    form = forms.of(data)
    rows = form.raw_rows(data.head("test", 3)[0], data)
    assert rows == [{"age": 31.0, "colour": "blue"}, {"age": 40.0, "colour": None}, {"age": 52.5, "colour": None}]
    import pandas as pd

    settings = form.settings(data, None)
    assert settings == TABLE and [list(c) for c in settings["columns"]] == [
        ["mean", "name", "type"],  # as the description holds them, sorted
        ["categories", "name", "type"],
    ]
    assert [c.name for c in form.signature_columns(settings)] == ["age", "colour"]
    np.testing.assert_array_equal(form.read(pd.DataFrame(rows[:1]), settings, None), x[:1])
