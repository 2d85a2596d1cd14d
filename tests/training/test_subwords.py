"""The n-grams of the words' characters beside the bag of words (train.<ds>.mlp.char_ngrams)."""

import numpy as np
import pytest
from support.models import mlp_settings

from pipeline.data import prepared
from pipeline.errors import ConfigError
from pipeline.kinds.labelled_texts import INDEX_FROM, WORD_INDEX_NAME, full_length_facts

pytestmark = pytest.mark.slow

from pipeline.training import models, subwords  # noqa: E402

# ids from INDEX_FROM + 1 (0 padding, 1 start, 2 out-of-vocabulary, 3 unused): rank 1 is id 4
WORDS = {"ab": 1, "abc": 2, "xy": 3, "b": 4}


def texts_folder(tmp_path, x, words=WORDS):
    facts = full_length_facts(x.shape[1], INDEX_FROM + 1 + len(WORDS))
    if words is not None:
        import dataclasses

        facts = dataclasses.replace(facts, word_index=WORD_INDEX_NAME)
    y = np.arange(len(x)) % 2
    return prepared.write_arrays(
        tmp_path / "p",
        {s: (x, y) for s in ("train", "val", "test")},
        input_="sequences",
        class_names=["a", "b"],
        facts=facts,
        assets={WORD_INDEX_NAME: words} if words is not None else None,
    )


def settings(char_ngrams=(2, 3), num_words=None, sublinear_tf=False):
    return mlp_settings(num_words=num_words, char_ngrams=char_ngrams, sublinear_tf=sublinear_tf)


def test_a_word_is_cut_framed_by_spaces_shortest_first():
    assert subwords.grams("ab", 2, 3) == [" a", "ab", "b ", " ab", "ab "]
    assert subwords.grams("ab", 4, 4) == [" ab "]
    assert subwords.grams("ab", 5, 6) == []


def test_the_ngrams_of_the_texts_words_are_weighed_as_tf_idf_of_unit_length(tmp_path):
    # words: 4 "ab", 5 "abc", 6 "xy", 7 "b"; with 2 to 3 characters
    x = np.array([[0, 1, 4, 5], [0, 0, 1, 4], [1, 6, 6, 2], [0, 1, 7, 4]], dtype=np.int32)
    data = texts_folder(tmp_path, x)
    model = models.mlp(settings(), data)
    out = np.asarray(models.keras.Model(model.input, model.get_layer("char_ngrams_idf").output)(x))
    # in two or more of the four training texts: those of "ab" (texts 0, 1, 3), and "b " (0, 1, 3 by
    # "ab", 3 by "b"); "abc"'s own, "xy"'s (one text) and " b", " b " (one) are dropped
    kept = [" a", "ab", "b ", " ab", "ab "]
    assert out.shape == (4, 1 + len(kept))  # the out-of-vocabulary column, never counted
    counts = np.array([[sum(g == k for w in words for g in subwords.grams(w, 2, 3)) for k in kept] for words in (
        ["ab", "abc"], ["ab"], ["xy", "xy"], ["b", "ab"])], dtype="float32")  # fmt: skip
    df = np.array([3, 3, 3, 3, 3])  # each kept n-gram in texts 0, 1 and 3
    np.testing.assert_allclose(out[:, 1:], counts * (np.log(5 / (1 + df)) + 1), rtol=1e-6)
    assert counts[0, 0] == 2 and counts[3, 2] == 2  # " a" of "ab" and "abc"; "b " of "ab" and "b"
    unit = np.asarray(models.keras.Model(model.input, model.get_layer("char_ngrams_unit_length").output)(x))
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.testing.assert_allclose(unit, np.divide(out, norms, out=np.zeros_like(out), where=norms > 0), rtol=1e-6)
    assert model.get_layer("words_and_ngrams").output.shape[-1] == 1 + 7 + 1 + len(kept)


def test_sublinear_tf_weighs_each_ngram_count_c_as_one_plus_its_log(tmp_path):
    x = np.array([[0, 1, 4, 5], [0, 0, 1, 4], [1, 6, 6, 2], [0, 1, 7, 4]], dtype=np.int32)
    data = texts_folder(tmp_path, x)
    plain, scaled = (
        np.asarray(models.keras.Model(m.input, m.get_layer("char_ngrams_idf").output)(x))
        for m in (models.mlp(settings(), data), models.mlp(settings(sublinear_tf=True), data))
    )
    # the counts are the plain weights over the idf of the text with every n-gram once (text 1)
    idf = np.where(plain[1] > 0, plain[1], 1.0)
    counts = plain / idf
    assert counts.max() == 2  # " a" and "b " are twice in two texts
    np.testing.assert_allclose(scaled, np.where(counts > 0, 1 + np.log(np.maximum(counts, 1)), 0) * idf, rtol=1e-6)


def test_with_tf_idf_the_words_and_their_ngrams_are_one_unit_vector(tmp_path):
    """As one vectorizer's vector of both: two unit vectors side by side would have length
    sqrt(2), which doubles the C of a linear SVM on them."""
    x = np.array([[0, 1, 4, 5], [0, 0, 1, 4], [1, 6, 6, 2], [0, 1, 7, 4]], dtype=np.int32)
    model = models.mlp(mlp_settings(output_mode="tf_idf", char_ngrams=(2, 3)), texts_folder(tmp_path, x))
    halves = np.asarray(models.keras.Model(model.input, model.get_layer("words_and_ngrams").output)(x))
    both = np.asarray(models.keras.Model(model.input, model.get_layer("unit_length").output)(x))
    np.testing.assert_allclose(np.linalg.norm(halves[[0, 1, 3]], axis=1), np.sqrt(2), rtol=1e-6)
    np.testing.assert_allclose(both[[0, 1, 3]], halves[[0, 1, 3]] / np.sqrt(2), rtol=1e-6)
    assert "unit_length" not in [layer.name for layer in models.mlp(settings(), texts_folder(tmp_path / "b", x)).layers]


def test_the_ngrams_weight_scales_their_half_before_the_two_are_made_one(tmp_path):
    """char_ngrams_weight w: the words' unit vector beside w times the n-grams', then one unit vector."""
    x = np.array([[0, 1, 4, 5], [0, 0, 1, 4], [1, 6, 6, 2], [0, 1, 7, 4]], dtype=np.int32)
    folder = texts_folder(tmp_path, x)
    model = models.mlp(mlp_settings(output_mode="tf_idf", char_ngrams=(2, 3), char_ngrams_weight=0.5), folder)
    words = np.asarray(models.keras.Model(model.input, model.get_layer("words_unit_length").output)(x))
    grams = np.asarray(models.keras.Model(model.input, model.get_layer("char_ngrams_unit_length").output)(x))
    both = np.asarray(models.keras.Model(model.input, model.get_layer("unit_length").output)(x))
    expected = np.concatenate([words, 0.5 * grams], axis=1)[[0, 1, 3]] / np.sqrt(1.25)
    np.testing.assert_allclose(both[[0, 1, 3]], expected, rtol=1e-6, atol=1e-7)


def test_a_word_past_num_words_and_the_marks_give_no_ngrams(tmp_path):
    x = np.array([[1, 2, 4, 4], [0, 1, 4, 7], [0, 0, 7, 4]], dtype=np.int32)
    model = models.mlp(settings(num_words=7), texts_folder(tmp_path, x))  # the words 4..6: "b" (7) left out
    out = np.asarray(models.keras.Model(model.input, model.get_layer("char_ngrams_idf").output)(x))
    # "ab" alone, whatever else the text holds: the same n-grams in each text, twice in the first
    np.testing.assert_allclose(out[0], 2 * out[1])
    np.testing.assert_allclose(out[1], out[2])


def test_a_model_with_ngrams_saves_and_loads_with_its_table(tmp_path):
    x = np.array([[0, 1, 4, 5], [0, 0, 1, 4], [1, 6, 6, 2], [0, 1, 7, 4]], dtype=np.int32)
    model = models.mlp(settings(), texts_folder(tmp_path, x))
    assert not model.get_layer("word_ngrams").trainable_weights
    path = tmp_path / "model.keras"
    model.save(path)
    again = models.keras.models.load_model(path)
    np.testing.assert_allclose(np.asarray(again(x)), np.asarray(model(x)), rtol=1e-6)


def test_the_ngrams_need_the_word_index(tmp_path):
    x = np.array([[0, 1, 4, 5], [0, 0, 1, 4]], dtype=np.int32)
    with pytest.raises(ConfigError, match=r"mlp\.char_ngrams: the prepared texts have no word index") as info:
        models.mlp(settings(), texts_folder(tmp_path, x, words=None))
    assert "\n" not in str(info.value)


def test_no_ngram_in_two_texts_is_an_error_not_an_empty_bag(tmp_path):
    x = np.array([[0, 1, 4, 5], [0, 0, 1, 6]], dtype=np.int32)  # "ab"+"abc", then "xy": nothing shared at 3
    with pytest.raises(ConfigError, match=r"no n-gram of 3 to 3 characters is in 2 or more training texts"):
        models.mlp(settings((3, 3)), texts_folder(tmp_path, x))


def test_the_training_split_is_counted_in_parts(tmp_path, monkeypatch):
    """The document frequencies are the same counted a text at a time."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 8, (40, 6)).astype(np.int32)
    data = texts_folder(tmp_path, x)
    grams_of, count = subwords.table({rank + INDEX_FROM: w for w, rank in WORDS.items()}, 8, 2, 3)
    whole = subwords.document_frequency(data, grams_of, count)
    monkeypatch.setattr(subwords, "GRAMS_AT_ONCE", 1)
    parts = subwords.document_frequency(data, grams_of, count)
    np.testing.assert_array_equal(whole[0], parts[0])
    assert whole[1] == parts[1] == 40
    present = [{g for i in row if 4 <= i < 8 for g in grams_of[i] if g} for row in x]
    np.testing.assert_array_equal(whole[0][1:], [sum(g in p for p in present) for g in range(1, count + 1)])


def test_the_idf_is_smoothed_as_one_more_text_holding_every_term():
    idf = subwords.smoothed_idf(3, np.array([1, 3]))
    np.testing.assert_allclose(idf, [np.log(4 / 2) + 1, 1.0])
