"""Raw inputs to model inputs, by the training's own code: a text becomes the very sequence the
prepared split holds; a digit's picture of any size, the dataset's kind of image, and any
picture of image folders the prepared pictures' size and colour; a request's rows are read or
refused with one line. The served model itself: test_serve.py."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest
from PIL import Image
from support.datasets import digit_image, encode, make_reuters_npz, make_word_index
from support.project import ROOT

from pipeline.config.loading.loader import load_params
from pipeline.data import images, mnist, reuters, texts
from pipeline.errors import DataError
from pipeline.kinds import labelled_texts
from pipeline.serving.classifier import Classifier, RequestError, answers


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    folder = tmp_path_factory.mktemp("raw")
    make_reuters_npz(folder / reuters.NPZ_NAME, n=120)
    make_word_index(folder / reuters.WORD_INDEX_NAME)
    return folder


def preprocess_cfg(**changes):
    return dataclasses.replace(load_params(ROOT / "params.yaml", "reuters").preprocess, **changes)


def text_of(ranks, word_index) -> str:
    """A newswire rebuilt from its word ranks, as a reader would type it: capitals, punctuation."""
    words = {rank: word for word, rank in word_index.items()}
    return ", ".join(words[int(r)].capitalize() for r in ranks) + "."


@pytest.mark.parametrize(
    "changes", [{}, {"num_words": 300, "skip_top": 5, "padding": "post", "truncating": "post"}, {"max_len": 20}]
)
def test_a_newswire_as_text_becomes_the_prepared_sequence(raw, changes):
    """Every text of the fixture, rebuilt from the word index, encodes to the row the
    preprocess stage wrote for it, whatever the vocabulary cap, sides and length."""
    cfg = preprocess_cfg(**changes)
    sequences, labels = reuters.load_raw(raw)
    index = labelled_texts.load_word_index(raw / reuters.WORD_INDEX_NAME)
    cfg_nosplit = dataclasses.replace(cfg, test_split=0.5, validation_split=0.0)
    splits, _, facts = reuters.split_and_pad(sequences, labels, cfg_nosplit)
    order = np.arange(len(sequences))
    np.random.RandomState(cfg.split_seed).shuffle(order)
    test_rows = order[int(len(sequences) * 0.5) :]
    written = [text_of(sequences[i], index) for i in test_rows]
    encoded = texts.encode_texts(written, index, cfg_nosplit, facts.vocab_size)
    np.testing.assert_array_equal(encoded, splits["test"][0])
    # and Keras' own sequences as load_data gives them (start mark, shifted ids; capped by
    # load_data's num_words, or not: the model caps them as the splits were)
    keras_form = [np.concatenate(([texts.START], sequences[i] + cfg.index_from)) for i in test_rows]
    np.testing.assert_array_equal(texts.encode_sequences(keras_form, cfg_nosplit, facts.vocab_size), splits["test"][0])
    np.testing.assert_array_equal(
        texts.encode_sequences(list(splits["test"][0]), cfg_nosplit, facts.vocab_size), splits["test"][0]
    )


def test_words_the_index_lacks_are_out_of_vocabulary():
    cfg = preprocess_cfg(max_len=6)
    index = {"oil": 1, "prices": 2, "u.s.": 3}
    (row,) = texts.encode_texts(["OIL prices (firmer) in U.S."], index, cfg, vocab_size=100)
    # the start mark, then oil, prices, and four words the index lacks ("u.s." is two words,
    # as Keras split the texts); seven ids truncated to six on the front
    assert row.tolist() == [1 + 3, 2 + 3, texts.OOV, texts.OOV, texts.OOV, texts.OOV]
    assert texts.words("Hudson's shares, up 5.5 pct") == ["hudson's", "shares", "up", "5", "5", "pct"]


def test_the_word_index_is_checked(tmp_path):
    (tmp_path / reuters.WORD_INDEX_NAME).write_text('{"oil": "one"}')
    with pytest.raises(DataError, match="reuters_word_index.json: expected a JSON object of words and their ranks"):
        reuters.prepare(tmp_path, tmp_path / "out", preprocess_cfg(), "preprocess.reuters")
    with pytest.raises(DataError, match="reuters_word_index.json: expected a JSON object of words and their ranks"):
        labelled_texts.load_word_index(tmp_path / reuters.WORD_INDEX_NAME)
    with pytest.raises(DataError, match=r"missing; run the download stage first"):
        reuters.prepare(tmp_path / "nowhere", tmp_path / "out", preprocess_cfg(), "preprocess.reuters")


def test_a_digit_of_any_size_and_kind_becomes_a_dataset_image():
    rng = np.random.RandomState(0)
    digit = digit_image(3, rng)
    same = mnist.read_digit(encode(digit), "d.png", 28)
    np.testing.assert_array_equal(same, images.picture(encode(digit), "d.png", 28, "grey"))
    # photographed: dark ink on light paper, colour, 4x larger, JPEG
    photo = Image.fromarray(255 - digit, "L").resize((112, 112), Image.Resampling.NEAREST).convert("RGB")
    buf = io.BytesIO()
    photo.save(buf, format="JPEG", quality=95)
    back = mnist.read_digit(buf.getvalue(), "photo.jpg", 28)
    assert back.shape == (28, 28) and back.dtype == np.uint8
    assert np.abs(back.astype(int) - digit.astype(int)).mean() < 3
    # drawn on a transparent canvas (an HTML canvas's PNG): black ink, alpha 0 around it
    rgba = np.zeros((56, 56, 4), np.uint8)
    rgba[..., 3] = np.kron(digit > 128, np.ones((2, 2), bool)) * 255
    canvas = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(canvas, format="PNG")
    drawn = mnist.read_digit(canvas.getvalue(), "canvas.png", 28)
    assert (drawn[digit > 128] > 200).all() and (drawn[digit <= 128] < 50).all()
    # white ink on the same canvas: on white it would vanish, so it is laid on black
    rgba[..., :3] = 255
    canvas = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(canvas, format="PNG")
    np.testing.assert_array_equal(mnist.read_digit(canvas.getvalue(), "canvas.png", 28), drawn)
    huge = io.BytesIO()
    Image.new("L", (5000, 4000)).save(huge, format="PNG")
    with pytest.raises(DataError, match=r"^h: a 5000x4000 image; expected at most 4096x4096 pixels$"):
        mnist.read_digit(huge.getvalue(), "h", 28)
    with pytest.raises(DataError, match=r"^x: unreadable image: not a PNG or JPEG file$"):
        mnist.read_digit(b"GIF89a not really", "x", 28)
    gif = io.BytesIO()
    Image.fromarray(digit).save(gif, format="GIF")
    with pytest.raises(DataError, match=r"^g: expected a PNG or JPEG image, got GIF$"):
        mnist.read_digit(gif.getvalue(), "g", 28)


def classifier(dataset: str, word_index=None, color: str = "grey") -> Classifier:
    """The pyfunc as MLflow loads it, minus the Keras model (reading rows needs none)."""
    model = Classifier()
    if dataset == "reuters":
        model.settings = {
            "dataset": "reuters",
            "input": "sequences",
            "labels": ["a", "b", "c"],
            "top_k": 2,
            "encoding": {
                "index_from": 3,
                "skip_top": 0,
                "padding": "pre",
                "truncating": "pre",
                "max_len": 5,
                "vocab_size": 50,
            },
        }
    elif dataset == "mnist":
        model.settings = {
            "dataset": "mnist",
            "input": "images",
            "labels": [str(d) for d in range(10)],
            "top_k": 3,
            "image_size": 28,
            "color": "grey",
            "reader": "digits",
            "model_image_size": 32,
        }
    else:  # image folders of another dataset
        model.settings = {
            "dataset": dataset,
            "input": "images",
            "labels": ["circle", "square"],
            "top_k": 1,
            "image_size": 16,
            "color": color,
            "reader": "folders",
            "model_image_size": 32,
        }
    model.word_index = word_index
    return model


def test_request_rows_are_read_or_refused_in_one_line():
    import pandas as pd

    model = classifier("reuters", {"grain": 1, "wheat": 2})
    x = model._inputs(pd.DataFrame({"text": ["Wheat, grain!", None], "ids": [None, [1, 4, 99]]}))
    assert x.tolist() == [[0, 0, 1, 5, 4], [0, 0, 1, 4, texts.OOV]]
    refusals = {
        "row 0: text: expected a text's words, got an empty text": pd.DataFrame({"text": ["  "]}),
        "row 0: text: expected a text's words, got '...!'": pd.DataFrame({"text": ["...!"]}),
        "row 1: expected exactly one of 'text' and 'ids', got neither": pd.DataFrame({"text": ["grain", None]}),
        "row 0: expected exactly one of 'text' and 'ids', got 'text' and 'ids'": pd.DataFrame(
            {"text": ["grain"], "ids": [[1, 2]]}
        ),
        "expected a column 'text' or 'ids', got 'txt'": pd.DataFrame({"txt": ["grain"]}),
        "expected at least one row": pd.DataFrame({"text": []}),
        "row 0: ids: expected a list of word ids (non-negative integers), got a negative value": pd.DataFrame(
            {"ids": [[1, -2]]}
        ),
    }
    for message, frame in refusals.items():
        with pytest.raises(RequestError) as caught:
            model._inputs(frame)
        assert caught.value.message == message
        assert caught.value.get_http_status_code() == 400
    columnar = pd.DataFrame({"text": [np.array(["grain", "wheat"])]})  # {"inputs": {"text": [...]}}
    with pytest.raises(RequestError, match=r"row 0: text: expected a string, got a list of 2 \(one object per row"):
        model._inputs(columnar)
    with pytest.raises(RequestError, match=r"params.top_k: expected an integer from 1 to 3, got 4"):
        model._top_k({"top_k": 4})


def test_mlflow_cannot_prefix_the_request_to_a_refusal():
    """MLflow's server sets `message` to "Failed to predict data '<the whole request>'...";
    a refusal keeps its line."""
    error = RequestError("row 0: image: unreadable")
    error.message = f"Failed to predict data '{'A' * 1000}'. \nError: {error.message}"
    assert error.message == "row 0: image: unreadable"
    assert '"message": "row 0: image: unreadable"' in error.serialize_as_json()


def test_images_come_as_bytes_base64_or_pixels():
    import base64

    import pandas as pd

    model = classifier("mnist")
    digit = digit_image(7, np.random.RandomState(1))
    png = encode(digit)
    frame = pd.DataFrame(
        {
            "image": [png, base64.b64encode(png).decode(), base64.b64encode(png), None],
            "pixels": [None, None, None, digit.tolist()],
        }
    )
    x = model._inputs(frame)
    assert x.shape == (4, 28, 28) and all((row == digit).all() for row in x)
    with pytest.raises(RequestError, match=r"^row 0: image: unreadable image: not a PNG or JPEG file$"):
        model._inputs(pd.DataFrame({"image": [b"hello"]}))
    with pytest.raises(
        RequestError,
        match=r"^row 0: pixels: expected a 28x28 array of grey values 0-255, "
        r"got 2x2 values 0..300$",
    ):
        model._inputs(pd.DataFrame({"pixels": [[[0, 1], [2, 300]]]}))


def test_pictures_of_image_folders_are_read_as_the_prepared_ones_in_their_colour():
    """The reader folders: no inversion (a dark shape on a light ground stays so), the
    prepared pictures' colour and size (bilinear), and pixels of that shape."""
    import pandas as pd

    rng = np.random.RandomState(2)
    rgb = rng.randint(0, 256, (24, 24, 3)).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb, "RGB").save(buf, format="PNG")
    expected = np.asarray(Image.fromarray(rgb, "RGB").resize((16, 16), Image.Resampling.BILINEAR))
    coloured = classifier("shapes", color="rgb")
    x = coloured._inputs(pd.DataFrame({"image": [buf.getvalue(), None], "pixels": [None, expected.tolist()]}))
    assert x.shape == (2, 16, 16, 3) and (x[0] == expected).all() and (x[1] == expected).all()
    with pytest.raises(RequestError, match=r"^row 0: pixels: expected a 16x16x3 array of RGB values 0-255, got a list"):
        coloured._inputs(pd.DataFrame({"pixels": [np.zeros((16, 16), int).tolist()]}))  # grey
    with pytest.raises(
        RequestError, match=r"^row 0: pixels: expected a 16x16x3 array of RGB .*, got 8x8x3 values 0..0$"
    ):
        coloured._inputs(pd.DataFrame({"pixels": [np.zeros((8, 8, 3), int).tolist()]}))
    grey = classifier("shapes", color="grey")
    light = np.full((16, 16), 230, np.uint8)  # a light ground is not inverted, unlike a digit's
    (row,) = grey._inputs(pd.DataFrame({"image": [encode(light)]}))
    assert row.shape == (16, 16) and (row == 230).all()
    grey_of_rgb = np.asarray(Image.fromarray(rgb, "RGB").convert("L").resize((16, 16), Image.Resampling.BILINEAR))
    assert (grey._inputs(pd.DataFrame({"image": [buf.getvalue()]}))[0] == grey_of_rgb).all()


def test_answers_name_the_class_with_its_probability_and_the_top_k():
    logits = np.array([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]])
    out = answers(logits, ["grain", "crude", "earn"], 2)
    assert out["label"].tolist() == ["crude", "grain"] and out["class"].tolist() == [1, 0]
    first = np.exp([0.0, 2.0, 1.0]) / np.exp([0.0, 2.0, 1.0]).sum()
    assert out["probability"][0] == pytest.approx(first[1])
    assert [t["label"] for t in out["top_k"][0]] == ["crude", "earn"]
    assert out["top_k"][0][1]["probability"] == pytest.approx(first[2])
