"""The n-grams of a bag of words' characters (`train.<ds>.mlp.char_ngrams`).

Each word the bag holds, framed by a space at each end (as scikit-learn's char_wb analyzer),
is cut into its n-grams of `shortest` to `longest` characters. A text's n-grams are its words':
counted (each count c as 1 + ln(c) with sublinear_tf), weighted by their inverse document
frequency in the training split and scaled to unit length (`tf_idf`, the word bag's weighing
too). The n-grams are numbered once, from the word index, when the model is built; the model
then looks each word id's n-grams up in a table it carries (a frozen Embedding), so that it
still takes the word ids a text's sequence holds, in training and in serving alike."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import keras
import numpy as np

from pipeline.errors import ConfigError
from pipeline.kinds.labelled_texts import load_word_index, words_by_id

if TYPE_CHECKING:
    from pipeline.data.prepared import Prepared
    from pipeline.kinds.labelled_texts import LabelledTextsFacts

# n-gram ids looked up at once while the training split streams by, so that the count's memory
# stays bounded whatever the split's size
GRAMS_AT_ONCE = 1 << 21
# an n-gram in fewer of the training split's texts teaches nothing the test split can use
MIN_TEXTS = 2


def grams(word: str, shortest: int, longest: int) -> list[str]:
    """The n-grams of `word` framed by spaces, shortest first, each length left to right."""
    framed = f" {word} "
    return [framed[i : i + n] for n in range(shortest, longest + 1) for i in range(len(framed) - n + 1)]


def table(words: dict[int, str], top: int, shortest: int, longest: int) -> tuple[np.ndarray, int]:
    """(the n-gram ids of each word id below `top`, a row per id padded with 0, as [top, width];
    how many n-grams): the n-grams numbered from 1 in the order the words' ids first hold them."""
    numbers: dict[str, int] = {}
    rows = {
        wid: [numbers.setdefault(g, len(numbers) + 1) for g in grams(word, shortest, longest)]
        for wid, word in sorted(words.items())
        if wid < top
    }
    out = np.zeros((top, max((len(r) for r in rows.values()), default=1)), dtype=np.int64)
    for wid, row in rows.items():
        out[wid, : len(row)] = row
    return out, len(numbers)


def document_frequency(prepared: Prepared, grams_of: np.ndarray, count: int) -> tuple[np.ndarray, int]:
    """(in how many texts of the training split each n-gram 0..count is, 0 for the padding; the
    number of texts), streamed."""
    top, width = grams_of.shape
    df = np.zeros(count + 1, dtype=np.int64)
    texts = 0
    for x, _ in prepared.chunks("train"):
        texts += len(x)
        step = max(1, GRAMS_AT_ONCE // max(1, x.shape[1] * width))
        for start in range(0, len(x), step):
            part = x[start : start + step].astype(np.int64)
            ids = grams_of[np.where((part >= 0) & (part < top), part, 0)].reshape(len(part), -1)
            codes = np.unique(np.arange(len(part), dtype=np.int64)[:, None] * (count + 1) + ids)
            df += np.bincount(codes % (count + 1), minlength=count + 1)
    df[0] = 0
    return df, texts


def _words(prepared: Prepared[LabelledTextsFacts]) -> dict[int, str]:
    """The word of each id of the prepared texts."""
    if prepared.facts.word_index is None:
        raise ConfigError(
            f"{prepared.folder}: mlp.char_ngrams: the prepared texts have no word index to cut into "
            "n-grams; expected char_ngrams: [] for them"
        )
    index = load_word_index(Path(prepared.folder) / prepared.facts.word_index)
    return words_by_id(index, prepared.facts.encoding.index_from)


def smoothed_idf(texts: int, df: np.ndarray) -> np.ndarray:
    """The inverse document frequency of terms in `df` of `texts` texts, smoothed as
    scikit-learn's: ln((1 + texts) / (1 + df)) + 1 (the word bag's too)."""
    return np.log((1.0 + texts) / (1.0 + df)) + 1.0


def sublinear(counts, name: str):
    """Each count c of `counts` as 1 + ln(c), 0 staying 0 (scikit-learn's sublinear_tf)."""
    counts = keras.ops.cast(counts, "float32")
    scaled = keras.ops.where(counts > 0, 1.0 + keras.ops.log(keras.ops.maximum(counts, 1.0)), 0.0)
    return keras.layers.Identity(name=f"{name}_sublinear_tf")(scaled)


def tf_idf(counts, idf: np.ndarray, sublinear_tf: bool, name: str):
    """TF-IDF, as scikit-learn's TfidfVectorizer: `counts` ([batch, 1 + terms]; first the count
    of what no term holds, which weighs 0), each (with `sublinear_tf`, as `sublinear`) times
    its term's `idf`, each text's vector scaled to unit length."""
    h = sublinear(counts, name) if sublinear_tf else keras.ops.cast(counts, "float32")
    weights = np.concatenate(([0.0], idf)).astype("float32")
    h = keras.layers.Rescaling(weights, name=f"{name}_idf")(h)
    return keras.layers.UnitNormalization(name=f"{name}_unit_length")(h)


def bag(tokens, prepared: Prepared[LabelledTextsFacts], top: int, shortest: int, longest: int, sublinear_tf: bool):
    """The TF-IDF (`tf_idf`) of the n-grams of the words (ids 1 .. top-1) of `tokens` ([batch,
    length] word ids): the layers, applied to `tokens`. The n-grams are numbered from 1 (0: none,
    the padding of the table's rows), so that a text's counts are a bincount of its words' rows."""
    grams_of, count = table(_words(prepared), top, shortest, longest)
    df, texts = document_frequency(prepared, grams_of, count)
    kept = df[1:] >= MIN_TEXTS
    known = int(kept.sum())
    renumber = np.zeros(count + 1, dtype=np.int64)
    renumber[1:][kept] = np.arange(1, known + 1)
    grams_of = renumber[grams_of]
    if known == 0:
        raise ConfigError(
            f"{prepared.folder}: mlp.char_ngrams: no n-gram of {shortest} to {longest} characters is in "
            f"{MIN_TEXTS} or more training texts; expected shorter n-grams, or char_ngrams: []"
        )
    length = tokens.shape[1]
    lookup = keras.layers.Embedding(
        top, grams_of.shape[1], embeddings_initializer="zeros", trainable=False, dtype="float32", name="word_ngrams"
    )
    inside = keras.ops.where(keras.ops.logical_and(tokens > 0, tokens < top), tokens, 0)
    ids = lookup(inside)
    lookup.set_weights([grams_of.astype("float32")])  # ids below 2**24: exact in float32
    flat = keras.ops.reshape(keras.ops.cast(ids, "int32"), (-1, length * grams_of.shape[1]))
    # [batch, 1 + known], the padding's first (reshaped: Keras does not know bincount's width)
    counts = keras.ops.reshape(keras.ops.bincount(flat, minlength=known + 1), (-1, known + 1))
    return tf_idf(counts, smoothed_idf(texts, df[1:][kept]), sublinear_tf, "char_ngrams")
