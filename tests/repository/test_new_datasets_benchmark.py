"""benchmarks/new_datasets.py and real_datasets.py without a training: the classical models are
scored on the test split the pipeline itself draws, and read the pictures as it reads them."""

import sys
from collections import Counter
from types import SimpleNamespace

import numpy as np
from PIL import Image
from support.project import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import new_datasets  # noqa: E402
import real_datasets  # noqa: E402

from pipeline.data import images, texts  # noqa: E402
from pipeline.kinds import labelled_texts  # noqa: E402


def test_the_texts_yardsticks_test_on_the_rows_preprocess_tests_on(tmp_path):
    # each text its number in binary, as words every text has: the test texts decode whole
    rows = [(" ".join("one" if i >> bit & 1 else "zero" for bit in range(6)), "a" if i % 3 else "b") for i in range(60)]
    (tmp_path / "raw").mkdir()
    lines = ["text,label", *(f"{text},{label}" for text, label in rows)]
    (tmp_path / "raw" / "t.csv").write_text("\n".join(lines) + "\n")
    cfg = SimpleNamespace(
        kind="labelled_texts", reader="table", text_column="text", label_column="label", num_words=None,
        max_len=8, padding="post", truncating="post", test_split=0.2, split_seed=113, validation_split=0.1,
        validation_seed=7, stratify=True,
    )  # fmt: skip
    prepared = texts.prepare(tmp_path / "raw", tmp_path / "prepared", cfg, "preprocess.t")  # type: ignore[arg-type]
    index = labelled_texts.load_word_index(tmp_path / "prepared" / texts.WORD_INDEX_NAME)
    x, _ = prepared.head("test", prepared.samples("test"))
    tested = set(texts.texts(x, index, texts.INDEX_FROM))
    chosen = new_datasets.test_rows([label for _, label in rows], cfg)
    assert len(chosen) == prepared.samples("test") == 12
    assert {rows[i][0] for i in chosen} == tested


def test_the_pictures_yardsticks_read_the_pixels_the_pipeline_trains_on(tmp_path):
    for split in ("train", "test"):
        for label in ("red", "blue"):
            folder = tmp_path / split / label
            folder.mkdir(parents=True)
            ink = (200, 20, 20, 255) if label == "red" else (20, 20, 200, 128)  # half transparent
            picture = Image.new("RGBA", (10, 10), (0, 0, 0, 0))
            picture.paste(ink, (2, 2, 8, 8))
            picture.save(folder / "0.png")
    x_train, y_train, x_test, _ = real_datasets.picture_arrays(tmp_path, 16, "rgb")
    assert x_train.shape == (2, 16 * 16 * 3) and list(y_train) == ["blue", "red"]
    pipeline = images.picture((tmp_path / "train" / "blue" / "0.png").read_bytes(), "0.png", 16, "rgb")
    np.testing.assert_array_equal(x_train[0], pipeline.astype(np.float32).ravel() / 255)
    assert x_train[0].max() == 1.0  # the transparent ground laid on white, as the pipeline lays it


def test_the_sets_colour_is_told_by_the_test_pipeline_add_uses(tmp_path):
    # a grey picture in RGB with a faint tint and 5 stray red pixels of 1,024, and a white one;
    # then a red one
    for split in ("train", "test"):
        (tmp_path / split / "a").mkdir(parents=True)
    tinted = np.repeat(np.tile(np.linspace(0, 240, 32), (32, 1))[..., None], 3, axis=-1)
    tinted[..., 0] += 8
    tinted[0, :5] = (200, 30, 30)
    Image.fromarray(tinted.astype(np.uint8)).save(tmp_path / "train" / "a" / "tinted.png")
    Image.new("RGB", (32, 32), "white").save(tmp_path / "test" / "a" / "white.png")
    assert real_datasets.picture_color(tmp_path) == "grey"
    assert real_datasets.describe(tmp_path, "image_folders")["real_colour"] == 0
    Image.new("RGB", (32, 32), (200, 30, 30)).save(tmp_path / "test" / "a" / "red.png")
    assert real_datasets.picture_color(tmp_path) == "rgb"
    assert real_datasets.describe(tmp_path, "image_folders")["real_colour"] == 1


def test_the_docstrings_set_takes_each_docstrings_first_paragraph():
    source = '''
def f():
    """Add two numbers.

    Longer text."""

class C:
    """A class
    of two lines."""

    def g(self):
        pass
'''
    assert list(real_datasets._first_paragraphs(source)) == ["Add two numbers.", "A class\nof two lines."]
    assert list(real_datasets._first_paragraphs("def broken(:\n")) == []


def with_emoji_test(lines: list[str], tmp_path, monkeypatch):
    """The emoji sets read `lines` as Unicode's emoji-test.txt."""
    (tmp_path / "emoji-test.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(real_datasets, "EMOJI_TEST", tmp_path / "emoji-test.txt")


def test_the_skin_tone_set_keeps_one_tone_and_groups_the_tones_of_one_emoji(tmp_path, monkeypatch):
    lines = [
        "1F44B ; fully-qualified # waving hand",
        "1F44B 1F3FB ; fully-qualified # waving hand: light skin tone",
        "1F44B 1F3FF ; fully-qualified # waving hand: dark skin tone",
        "1F9D1 1F3FB 200D 1F91D 200D 1F9D1 1F3FF ; fully-qualified # people holding hands: two tones",
        "1F44B 1F3FD ; minimally-qualified # not fully qualified",
    ]
    with_emoji_test(lines, tmp_path, monkeypatch)
    assert [(tone, base) for _, tone, base in real_datasets._toned_emoji()] == [("light", "1f44b"), ("dark", "1f44b")]


def test_the_emoji_are_read_with_their_group_and_subgroup_components_and_skin_tones_left_out(tmp_path, monkeypatch):
    lines = [
        "# group: Smileys & Emotion",
        "# subgroup: face-smiling",
        "1F600 ; fully-qualified # grinning face",
        "263A ; unqualified # smiling face",
        "# subgroup: face-affection",
        "1F970 ; fully-qualified # smiling face with hearts",
        "# group: Component",
        "# subgroup: skin-tone",
        "1F3FB ; component # light skin tone",
        "1F9B0 ; fully-qualified # red hair",
        "# group: People & Body",
        "# subgroup: hand-fingers-open",
        "1F44B 1F3FB ; fully-qualified # waving hand: light skin tone",
        "1F44B ; fully-qualified # waving hand",
    ]
    with_emoji_test(lines, tmp_path, monkeypatch)
    assert list(real_datasets._emoji()) == [
        ("\U0001f600", "Smileys & Emotion", "face-smiling"),
        ("\U0001f970", "Smileys & Emotion", "face-affection"),
        ("\U0001f44b", "People & Body", "hand-fingers-open"),
    ]


def test_several_seeds_make_one_row_of_their_mean_and_spread_beside_one_scoring_of_the_classical_models(
    tmp_path, monkeypatch, capsys
):
    def make(folder):
        folder.mkdir(parents=True)
        return {"train": 8, "test": 4}

    real = real_datasets.RealSet(name="shapes", kind="image_folders", title="shapes", needs=(), make=make)
    monkeypatch.setattr(new_datasets, "sets", lambda opts: [real])
    calls = []

    def add_and_repro(name, kind, folder, tmp, seed=None, classical=True):
        calls.append((seed, classical))
        found = {"svc": 0.7, "logistic": 0.6} if classical else {}
        accuracy = {42: 0.75, 1: 0.65, 2: 0.74}[seed]
        times = {"train_seconds": seed, "epochs_trained": 3, "best_epoch": 3, "repro_seconds": 100 + seed}
        moves = {"swing_first": 0.1 * (seed == 1), "swing_second": 0.01 * (seed == 2)}
        return {**found, "test_accuracy": accuracy, **times, **moves}

    monkeypatch.setattr(new_datasets, "add_and_repro", add_and_repro)
    rows = new_datasets.sets_main(SimpleNamespace(seeds=[42, 1, 2]), tmp_path)
    assert calls == [(42, True), (1, False), (2, False)]  # one split: the classical models scored once
    (row,) = rows
    assert row["test_accuracy"] == np.mean([0.75, 0.65, 0.74]) and (row["lowest"], row["highest"]) == (0.65, 0.75)
    assert (row["svc"], row["seeds"], row["train_seconds"], row["repro_seconds"]) == (0.7, 3, 15, 142)
    new_datasets.print_table(rows, [])
    out = capsys.readouterr().out
    assert "the mean of 3 seeds' test accuracy, and its lowest and highest" in out
    # the mean 0.7133 is above the SVM's 0.7 though one seed is under it: the lowest shows it
    assert out.splitlines()[-1].split() == ["shapes", "images", "no", "8", "/", "4", "0.7133", "0.6500", "0.7500",
                                            "0.7000", "0.6000", "yes", "15", "142", "0.100", "0.010"]  # fmt: skip


def test_the_swings_are_the_largest_falls_between_epochs_in_each_half(tmp_path):
    history = tmp_path / "history.csv"
    rows = ["epoch,loss,accuracy,val_loss,val_accuracy,learning_rate"]
    rows += [f"{i + 1},1,0.5,1,{v},0.1" for i, v in enumerate([0.2, 0.6, 0.5, 0.55, 0.6, 0.58])]
    history.write_text("\n".join(rows) + "\n")
    first, second = new_datasets.swings(history)
    # epochs 1-3: a rise of 0.4 (learning, not a swing), a fall of 0.1; from epoch 3 on: a fall of 0.02
    assert (round(first, 6), round(second, 6)) == (0.1, 0.02)
    history.write_text(
        "epoch,loss,accuracy,val_loss,val_accuracy,learning_rate\n1,1,0.5,nan,nan,0.1\n2,1,0.6,nan,nan,0.1\n"
    )
    assert new_datasets.swings(history) == (0.0, 0.0)  # no validation split: the train stage writes nan


def test_a_tile_sheet_is_read_row_by_row_in_the_suits_order():
    sheet = Image.new("RGBA", (5 * 4, 9 * 3))  # 5 columns of 4x3 cells, each cell its own colour
    for i in range(45):
        sheet.paste((i, 0, 0, 255), ((i % 5) * 4, (i // 5) * 3, (i % 5 + 1) * 4, (i // 5 + 1) * 3))
    cells = real_datasets._sheet_tiles(sheet, 5, (4, 3))
    assert [tile.getpixel((0, 0))[0] for _, tile in cells] == list(range(42))
    assert {tile.size for _, tile in cells} == {(4, 3)}
    assert Counter(suit for suit, _ in cells) == {
        "dots": 9, "bamboo": 9, "characters": 9, "winds": 4, "dragons": 3, "bonus": 8
    }  # fmt: skip
    assert [suit for suit, _ in cells][13:16] == ["dragons", "dragons", "characters"]
    assert [suit for suit, _ in cells][33:38] == ["bonus"] * 4 + ["dragons"]
