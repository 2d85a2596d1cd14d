"""What `pipeline add` reads from a dataset to choose its settings: each kind's reader on real
files (PNG and JPEG pictures of several sizes and modes, CSV texts), the figure each choice was
read from, and a dataset it cannot read refused as preprocess refuses it."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from support.datasets import write_archive

from pipeline.data import images, survey, texts
from pipeline.data.splits import split_validation
from pipeline.errors import DataError
from pipeline.kinds.image_folders import ImageFoldersPreprocessConfig
from pipeline.kinds.labelled_texts import TextTablePreprocessConfig


def png(side: int, mode: str = "L", colour: bool = False, fmt: str = "PNG", seed: int = 0) -> bytes:
    """A picture `side` pixels a side: grey noise, or a red disc on a transparent ground (RGBA)."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    if colour:
        img = Image.new("RGBA", (side, side), (0, 0, 0, 0))
        ImageDraw.Draw(img).ellipse((side // 4, side // 4, 3 * side // 4, 3 * side // 4), fill=(220, 30, 30, 255))
    else:
        img = Image.fromarray(rng.integers(0, 255, (side, side), dtype=np.uint8), "L").convert(mode)
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


def folders(tmp_path, counts: dict[str, int], picture=lambda i: png(20)) -> Path:
    """A download folder holding pictures.zip: train/<class>/ with `counts` pictures, test/<class>/ one each."""
    members = {}
    for label, n in counts.items():
        for i in range(n):
            members[f"train/{label}/{i}.png"] = picture(i)
        members[f"test/{label}/0.png"] = picture(0)
    raw = tmp_path / "raw"
    raw.mkdir()
    write_archive(raw / "pictures.zip", members)
    return raw


def chosen(choices) -> dict:
    return {c.key: c.value for c in choices}


def test_small_grey_pictures_train_at_32_pixels_or_more_and_the_classes_spread_is_reported(tmp_path):
    choices = images.survey(folders(tmp_path, {"a": 5, "b": 4}, lambda i: png(20, "RGB")), None)
    assert chosen(choices) == {
        "preprocess.image_size": 32,
        "train.epochs": images.EPOCH_BOUNDS[1],
        "preprocess.color": "grey",
        "train.class_weight": None,
    }
    why = {c.key: c.why for c in choices}
    assert why["preprocess.image_size"] == "the median side of all 11 pictures is 20 px, within 32 to 48"
    # saved as RGB, the grey pictures have no colour
    assert why["preprocess.color"] == "0 of all 11 pictures have colour"


def test_colour_on_a_transparent_ground_is_rgb_and_the_line_says_how_far_apart_the_classes_are(tmp_path):
    raw = folders(tmp_path, {"disc": 20, "noise": 2}, lambda i: png(40, colour=i % 2 == 0))
    choices = images.survey(raw, None)
    assert {k: v for k, v in chosen(choices).items() if k != "train.epochs"} == {
        "preprocess.image_size": 40,
        "preprocess.color": "rgb",
        "train.class_weight": None,
    }
    assert {c.key: c.why for c in choices}["train.class_weight"] == (
        "the classes have 2 to 20 training pictures (10.0x); balanced weighs each class by its size, for the small "
        "classes"
    )


def test_the_colour_line_says_how_many_pictures_read_are_laid_on_black(tmp_path):
    from PIL import Image

    glyph = np.zeros((20, 20, 4), np.uint8)
    glyph[5:15, 8:12] = (255, 255, 255, 255)  # white on a transparent canvas
    buf = io.BytesIO()
    Image.fromarray(glyph, "RGBA").save(buf, format="PNG")
    raw = folders(tmp_path, {"a": 3, "b": 3}, lambda i: buf.getvalue() if i == 1 else png(20))
    why = {c.key: c.why for c in images.survey(raw, None)}
    assert why["preprocess.color"] == (
        "0 of all 8 pictures have colour; 2 are drawn light on a transparent canvas: laid on black, where white "
        "would hide them"
    )


@pytest.mark.parametrize("side, size", [(6, 32), (32, 32), (40, 40), (64, 48), (images.PHOTO_SIDE, 48)])
def test_the_side_is_the_median_within_the_small_models_bounds(tmp_path, side, size):
    choices = images.survey(folders(tmp_path, {"a": 2, "b": 2}, lambda i: png(side, fmt="JPEG")), None)
    assert chosen(choices)["preprocess.image_size"] == size
    assert survey.TEMPLATE not in chosen(choices)


def test_photos_start_from_the_photos_template_at_its_own_side(tmp_path):
    choices = images.survey(folders(tmp_path, {"a": 2, "b": 2}, lambda i: png(images.PHOTO_SIDE + 1)), None)
    assert chosen(choices)[survey.TEMPLATE] == "photos"
    assert "preprocess.image_size" not in chosen(choices)
    assert "train.epochs" not in chosen(choices)


@pytest.mark.parametrize(
    "counts, split, epochs, why",
    [
        # 992 after the validation tenth of each class: 61 passes see 60,512 pictures
        ([551, 551], 0.1, 61, "992 training pictures: 61 epochs to see 60,000"),
        ([3000, 3000], 0.0, 30, "6,000 training pictures: 10 epochs to see 60,000, within 30 to 150"),
        ([50, 50], 0.2, 150, "80 training pictures: 750 epochs to see 60,000, within 30 to 150"),
        # a class of 3 keeps 2: its tenth, rounded, is none, but a class of two or more gives one
        ([3] * 10, 0.1, 150, "20 training pictures: 3,000 epochs to see 60,000, within 30 to 150"),
    ],
)
def test_the_small_models_epochs_see_a_number_of_pictures_whatever_the_sets_size(counts, split, epochs, why):
    choice = images.small_epochs(counts, split)
    assert (choice.key, choice.value, choice.why, choice.template) == ("train.epochs", epochs, why, "image_folders")


def test_the_epochs_count_the_training_pictures_preprocess_leaves_after_the_validation_share(tmp_path):
    raw = folders(tmp_path, {"a": 300, "b": 301, "c": 2}, lambda i: png(8))
    cfg = ImageFoldersPreprocessConfig("image_folders", "folders", 28, "grey", 0.25, 7, True, None)
    # held out: 75 of a, 75 of b (75.25 rounded), 1 of c: 452 left, as preprocess's split leaves
    kept, _ = split_validation(603, 0.25, 7, np.repeat([0, 1, 2], [300, 301, 2]))
    assert len(kept) == 452
    assert chosen(images.survey(raw, cfg))["train.epochs"] == 133  # 60,000 / 452, rounded up
    assert chosen(images.survey(raw, None))["train.epochs"] == 100  # 60,000 / 603, rounded up


def test_only_a_bounded_number_of_pictures_is_decoded(tmp_path, monkeypatch):
    monkeypatch.setattr(images, "SURVEY_PICTURES", 4)
    choices = images.survey(folders(tmp_path, {"a": 6, "b": 6}, lambda i: png(12 if i < 3 else 24)), None)
    assert {c.key: c.why for c in choices}["preprocess.image_size"].startswith("the median side of the 4 pictures read")


def test_pictures_it_cannot_read_are_refused_as_preprocess_refuses_them(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    write_archive(raw / "pictures.zip", {"train/a/0.png": b"not a picture", "test/a/0.png": png(8)})
    with pytest.raises(DataError, match=r"pictures.zip: one class \('a'\); expected two class folders or more"):
        images.survey(raw, None)
    write_archive(raw / "pictures.zip", {"train/a/0.png": b"no png", "train/b/0.png": png(8), "test/a/0.png": png(8)})
    with pytest.raises(DataError, match=r"test has no folder for class 'b'"):
        images.survey(raw, None)
    write_archive(
        raw / "pictures.zip",
        {"train/a/0.png": b"no png", "train/b/0.png": png(8), "test/a/0.png": png(8), "test/b/0.png": png(8)},
    )
    with pytest.raises(DataError, match=r"train/a/0.png: unreadable image: not a PNG or JPEG file"):
        images.survey(raw, None)


def table(tmp_path, rows, header="text,label"):
    raw = tmp_path / "raw"
    raw.mkdir(parents=True)
    (raw / "texts.csv").write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return raw


def config(**keys) -> TextTablePreprocessConfig:
    values = dict(
        kind="labelled_texts", reader="table", text_column="text", label_column="label", num_words=None,
        max_len=300, padding="pre", truncating="pre", test_split=0.2, split_seed=113, validation_split=0.1,
        validation_seed=7, stratify=True,
    )  # fmt: skip
    return TextTablePreprocessConfig(**{**values, **keys})


def test_texts_take_the_length_most_hold_every_word_and_an_svms_penalty(tmp_path):
    # 99 texts of 3 words and one of 40: 99% have 4 ids or fewer (the start mark included)
    rows = [f"red green w{i},{'a' if i % 2 else 'b'}" for i in range(99)] + [" ".join(["long"] * 40) + ",a"]
    choices = texts.survey(table(tmp_path, rows), config())
    assert chosen(choices) == {
        "preprocess.max_len": 8,  # 4, rounded up to a multiple of 8
        # red, green, long and w0..w98: 102 words, past the 4 ids below the first
        "preprocess.num_words": 102 + texts.INDEX_FROM + 1,
        # 100 texts, 0.2 held out for testing and 0.1 of the rest for validation: 72 train; 1 / (2 x 72)
        "train.mlp.l2": 0.0069,
        "train.class_weight": None,
    }
    why = {c.key: c.why for c in choices}
    assert why["preprocess.max_len"] == (
        "99% of the 100 texts have 4 words or fewer, the longest 41 (the start mark counted), "
        "rounded up to a multiple of 8"
    )
    assert why["preprocess.num_words"] == "the texts hold 102 words: every one, after ids 0 to 3 for the marks"
    assert why["train.mlp.l2"] == "about 72 training texts: 1 / (2 C n) for a linear SVM's C = 1"


def test_the_penalty_follows_the_training_share(tmp_path):
    rows = [f"w{i} x,{'a' if i % 2 else 'b'}" for i in range(1000)]
    l2 = {c.key: c.value for c in texts.survey(table(tmp_path, rows), config(validation_split=0.0))}["train.mlp.l2"]
    assert l2 == 0.00063 == texts.svm_l2(800)  # 1 / 1600 = 0.000625, to two significant digits


def test_the_vocabulary_is_capped_and_unbalanced_labels_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(texts, "MAX_WORDS", 2)
    rows = [f"one two three {i % 2},{'a' if i < 20 else 'b'}" for i in range(22)]
    choices = texts.survey(table(tmp_path, rows), config())
    assert chosen(choices)["preprocess.num_words"] == 2 + texts.INDEX_FROM + 1
    assert "the texts hold 5 words, at most 2: the 2 most frequent, after ids 0 to 3 for the marks" in {
        c.why for c in choices
    }
    # 20 against 2: reported, the template's class_weight left as it is
    assert chosen(choices)["train.class_weight"] is None
    why = {c.key: c.why for c in choices}["train.class_weight"]
    assert why.startswith("the classes have 2 to 20 texts (10.0x); balanced weighs")


def test_texts_it_cannot_read_are_refused_naming_the_file_and_line(tmp_path):
    raw = table(tmp_path, ["a text,x", "another,y"], header="body,label")
    with pytest.raises(DataError, match=r"texts.csv:2: no column 'text' \(its columns: body, label\)"):
        texts.survey(raw, config())
    with pytest.raises(DataError, match=r"texts.csv: label: one label \('x'\); expected two or more"):
        texts.survey(table(tmp_path / "one", ["a text,x", "another,x"]), config())


def test_class_weight_chooses_nothing_however_far_apart_the_classes_and_says_how_far():
    for counts in ({"a": 5, "b": 5}, {"a": 50, "b": 5}, {"a": 5000, "b": 5}):
        choice = survey.class_weight(counts, "pictures")
        assert (choice.key, choice.value) == ("train.class_weight", None)
    assert choice.why.startswith("the classes have 5 to 5,000 pictures (1000.0x); balanced weighs")


def test_spread_picks_evenly_and_all_when_fewer():
    assert survey.spread(3, 5) == [0, 1, 2]
    assert survey.spread(10, 4) == [0, 2, 5, 7]
