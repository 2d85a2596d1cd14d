"""The forms a served model reads: one registry that covers every form a kind of dataset
prepares, each form's columns, rows and example."""

import io

import numpy as np
import pytest
from PIL import Image

from pipeline.data import prepared
from pipeline.kinds import registry as kinds
from pipeline.serving import forms


def test_every_form_a_kind_prepares_is_served_and_read():
    served = [forms.named(kind.form) for kind in kinds.KINDS.values()]
    assert len({type(form) for form in served}) == len(kinds.KINDS)  # one class each
    columns = [c for form in served for c in form.columns]
    assert len(columns) == len(set(columns))  # a request's column says its form
    for form in served:
        assert [c.name for c in form.signature_columns()] == list(form.columns)


def test_pictures_as_a_user_has_them_read_back_to_the_same_pixels(tmp_path):
    x = np.random.RandomState(0).randint(0, 256, (3, 6, 6, 3)).astype(np.uint8)
    data = prepared.write_arrays(
        tmp_path / "p", {"test": (x, np.zeros(3, np.uint8))}, input_="images", class_names=["a", "b"],
        details={"image_size": 6, "color": "rgb", "reader": "folders"},
    )  # fmt: skip
    rows = forms.of(data).raw_rows(data.head("test", 3)[0], data)
    assert [np.asarray(Image.open(io.BytesIO(r["image"]))).tolist() for r in rows] == x.tolist()
    settings = {"image_size": 6, "color": "rgb", "reader": "folders"}
    read = forms.named("images").inputs([("image", r["image"]) for r in rows], settings, None)
    assert np.array_equal(read, x)
    assert forms.of({"input": "images"}) is forms.named("images")


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
