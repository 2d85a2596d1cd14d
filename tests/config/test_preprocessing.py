"""pipeline/config/preprocessing.py: the two readers of labelled texts share their keys; each
reader's section is its own class."""

import dataclasses

from pipeline.config.preprocessing import (
    ImageFoldersPreprocessConfig,
    ReutersPreprocessConfig,
    TextTablePreprocessConfig,
)


def names(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_the_text_readers_share_every_key_but_their_own_reading():
    shared = names(ReutersPreprocessConfig) & names(TextTablePreprocessConfig)
    assert {"num_words", "max_len", "padding", "truncating", "test_split", "split_seed"} <= shared
    assert names(ReutersPreprocessConfig) - shared == {"skip_top", "index_from"}
    assert names(TextTablePreprocessConfig) - shared == {"text_column", "label_column"}
    # one declaration, one meaning, for a key both take
    for name in shared - {"reader"}:
        meanings = {
            next(f for f in dataclasses.fields(cls) if f.name == name).metadata["help"]
            for cls in (ReutersPreprocessConfig, TextTablePreprocessConfig)
        }
        assert len(meanings) == 1, name


def test_pictures_take_no_text_key():
    assert not names(ImageFoldersPreprocessConfig) & {"max_len", "num_words", "text_column"}
