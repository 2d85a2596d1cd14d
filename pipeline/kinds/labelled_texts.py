"""Kind `labelled_texts`: texts and their labels, prepared as padded int32 sequences of word
ids. Two readers: `table` (a CSV or JSON Lines file of a text and a label column,
pipeline/data/texts.py) and `keras` (Keras' Reuters arrays and word index,
pipeline/data/reuters.py). Its facts (`LabelledTextsFacts`): the vocabulary, the lengths, the
encoding and the word index's file. Its models are the table `texts`; its template
`add.labelled_texts`; its served requests a text or a sequence of word ids."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional

from pipeline.errors import DataError
from pipeline.fields import fraction, non_negative_int, positive_int, spec
from pipeline.io import read_json
from pipeline.kinds.kind import Kind, Reader, kind_key, reader_key, stratify, validation_split

NAME = "labelled_texts"
FORM = "sequences"
# the ids below a table's words: 0 padding, 1 the start mark, 2 out-of-vocabulary, as Keras' Reuters'
INDEX_FROM = 3
# a table's word index, in its prepared folder: {word: rank}, ranks from 1 (the most frequent)
WORD_INDEX_NAME = "word_index.json"
# the side of a sequence padding is added on, or a long text cut on
Side = Literal["pre", "post"]


@dataclass(frozen=True)
class _TextsPreprocessConfig:
    """The keys both readers of labelled texts take."""

    kind: str = kind_key()
    num_words: Optional[int] = spec(
        "a positive integer or null",
        lambda v: v > 0,
        help="Vocabulary cap: rarer words become the out-of-vocabulary mark; null keeps every word.",
    )
    max_len: int = positive_int(
        help="Sequence length: shorter texts are padded, longer ones truncated (never dropped)."
    )
    padding: Side = spec(help="The side padding is added on.")
    truncating: Side = spec(help="The side long texts are cut on.")
    test_split: float = fraction(help="The share of the texts held out for testing.", low_open=True)
    split_seed: int = non_negative_int(help="Shuffle seed of the train/test split.")
    validation_split: float = validation_split()
    validation_seed: int = non_negative_int(help="Seed of the validation hold-out.")


@dataclass(frozen=True)
class ReutersPreprocessConfig(_TextsPreprocessConfig):
    reader: Literal["keras"] = reader_key(
        "keras: Keras' Reuters arrays (reuters.npz) and word index, split as Keras' load_data splits them "
        "(test_split 0.2 and split_seed 113, Keras' own, give its 8,982 train and 2,246 test texts)."
    )
    skip_top: int = non_negative_int(help="The most frequent words to mark out-of-vocabulary.")
    index_from: int = spec(
        "an integer >= 3 (0 pad, 1 start, 2 out-of-vocabulary)",
        lambda v: v >= 3,
        help="Keras' shift of the word indices: 0 is padding, 1 the start mark, 2 out-of-vocabulary.",
    )


@dataclass(frozen=True)
class TextTablePreprocessConfig(_TextsPreprocessConfig):
    reader: Literal["table"] = reader_key(
        "table: one CSV (with a header line) or JSON Lines file of a text column and a label column."
    )
    text_column: str = spec("a column name", lambda v: bool(v), help="The column holding each sample's text.")
    label_column: str = spec(
        "a column name",
        lambda v: bool(v),
        help="The column holding each sample's label (text or integer); the classes are its values, sorted.",
    )
    stratify: bool = stratify(
        "the test share, then the validation share of the rest, are held out",
        "split_seed and validation_seed",
        "every split (from 3 samples on, with a test_split below 0.5)",
    )


@dataclass(frozen=True)
class TextEncoding:
    """How a text's word ranks became the ids of its sequence (`pipeline.data.texts.encode_texts`'s
    keys besides the vocabulary and the length): the words' first id, the most frequent words
    marked out-of-vocabulary, the sides padding is added and long texts are cut on (in the order a
    served model's settings list them)."""

    index_from: int
    padding: Side
    skip_top: int
    truncating: Side


@dataclass(frozen=True)
class LabelledTextsFacts:
    """What the description of prepared texts holds of them besides the common keys: the
    vocabulary (the ids below `vocab_size`), the sequences' length, the texts' lengths in ids (the
    start mark included: their mean and longest, and the share cut to `max_len`), the encoding,
    and the word index's file in the prepared folder (None: none, selftest's random ids)."""

    vocab_size: int
    max_len: int
    length_mean: float
    length_max: int
    truncated_fraction: float
    encoding: TextEncoding
    word_index: Optional[str]


def full_length_facts(max_len: int, vocab_size: int, encoding: Optional[TextEncoding] = None) -> LabelledTextsFacts:
    """The facts of sequences of `max_len` word ids below `vocab_size` each, none padded or cut,
    with no word index: selftest's random ones (`encoding`: by default a table's, its words from
    INDEX_FROM on, none skipped, padded and cut before)."""
    encoding = encoding or TextEncoding(index_from=INDEX_FROM, padding="pre", skip_top=0, truncating="pre")
    return LabelledTextsFacts(vocab_size, max_len, float(max_len), max_len, 0.0, encoding, word_index=None)


def samples(cfg: Any, n: int, rng: Any) -> tuple[Any, LabelledTextsFacts, dict]:
    """`n` sequences of random word ids of the section's length and vocabulary (10,000 words when
    it keeps every word), their facts, and a word index of made-up words (`made_up_word`) for
    the models that read the words themselves."""
    vocab = cfg.num_words or 10000
    # encoded as the reader encodes texts: Reuters' own index_from and skip_top, a table's INDEX_FROM and 0
    encoding = TextEncoding(
        getattr(cfg, "index_from", INDEX_FROM), cfg.padding, getattr(cfg, "skip_top", 0), cfg.truncating
    )
    facts = dataclasses.replace(full_length_facts(cfg.max_len, vocab, encoding), word_index=WORD_INDEX_NAME)
    index = {made_up_word(rank): rank for rank in range(1, vocab - encoding.index_from)}
    return rng.randint(1, vocab, (n, cfg.max_len)).astype("int32"), facts, {WORD_INDEX_NAME: index}


def load_word_index(path: Path | str) -> dict[str, int]:
    """A word index as Keras publishes Reuters' (and pipeline/data/texts.py makes one for a table): {word: rank},
    ranks from 1 (the most frequent word)."""
    index = read_json(Path(path))
    if not (
        isinstance(index, dict)
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in index.values())
    ):
        raise DataError(
            f"{path}: expected a JSON object of words and their ranks (positive integers), as Keras publishes it"
        )
    return index


def words_by_id(word_index: dict[str, int], index_from: int) -> dict[int, str]:
    """The word of each id of the prepared texts: the word index's ranks shifted by `index_from`."""
    return {rank + index_from: word for word, rank in word_index.items()}


def made_up_word(rank: int) -> str:
    """A word of its own for each rank: the rank's digits in base 26, as letters (1: "b", 26: "ba")."""
    word = ""
    while True:
        rank, digit = divmod(rank, 26)
        word = chr(ord("a") + digit) + word
        if rank == 0:
            return word


KIND = Kind(
    name=NAME,
    help="a CSV or JSON Lines file of texts and labels",
    form=FORM,
    dtype="int32",
    pictures=False,
    readers={
        "table": Reader("pipeline.data.texts", TextTablePreprocessConfig),
        "keras": Reader("pipeline.data.reuters", ReutersPreprocessConfig),
    },
    models="texts",
    templates=("labelled_texts",),
    served="pipeline.serving.forms:Texts",
    facts=LabelledTextsFacts,
    samples=samples,
)
