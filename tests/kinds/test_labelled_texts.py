"""pipeline/kinds/labelled_texts.py: the two readers of labelled texts share their keys; each
reader's section is its own class."""

import dataclasses

from pipeline.kinds.image_folders import ImageFoldersPreprocessConfig
from pipeline.kinds.labelled_texts import ReutersPreprocessConfig, TextTablePreprocessConfig


def names(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_the_text_readers_share_every_key_but_their_own_reading():
    shared = names(ReutersPreprocessConfig) & names(TextTablePreprocessConfig)
    assert {"num_words", "max_len", "padding", "truncating", "test_split", "split_seed"} <= shared
    assert names(ReutersPreprocessConfig) - shared == {"skip_top", "index_from"}
    # stratify: a table's split is this project's to draw; Keras' Reuters split is Keras'
    assert names(TextTablePreprocessConfig) - shared == {"text_column", "label_column", "stratify"}
    # one declaration, one meaning, for a key both take
    for name in shared - {"reader"}:
        meanings = {
            next(f for f in dataclasses.fields(cls) if f.name == name).metadata["help"]
            for cls in (ReutersPreprocessConfig, TextTablePreprocessConfig)
        }
        assert len(meanings) == 1, name


def test_pictures_take_no_text_key():
    assert not names(ImageFoldersPreprocessConfig) & {"max_len", "num_words", "text_column"}


def test_the_readers_whose_splits_are_drawn_here_may_stratify_them():
    """The table and the image folders take `stratify` (one meaning each, one declaration);
    Keras' Reuters split is Keras' own, which takes none."""
    assert "stratify" in names(TextTablePreprocessConfig) & names(ImageFoldersPreprocessConfig)
    assert "stratify" not in names(ReutersPreprocessConfig)
    for cls in (TextTablePreprocessConfig, ImageFoldersPreprocessConfig):
        stratify = next(f for f in dataclasses.fields(cls) if f.name == "stratify")
        assert stratify.type in (bool, "bool") and "class by class" in stratify.metadata["help"]


def test_the_selftest_words_are_letters_one_per_rank():
    from pipeline.kinds.labelled_texts import made_up_word

    assert [made_up_word(r) for r in (0, 1, 25, 26, 27, 26 * 26)] == ["a", "b", "z", "ba", "bb", "baa"]


def test_an_id_is_its_words_rank_shifted_past_the_marks():
    from pipeline.kinds.labelled_texts import words_by_id

    assert words_by_id({"the": 1, "of": 2}, 3) == {4: "the", 5: "of"}
