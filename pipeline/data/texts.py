"""Labelled texts -> padded int32 sequences: the reader `table` of kind `labelled_texts` (a CSV
or JSON Lines file of a text column and a label column), and the encoding every dataset of
texts shares (Keras' Reuters arrays too, pipeline/data/reuters.py).

A text becomes a sequence as Keras made Reuters' (`encode_texts`): split into words
(lowercased, punctuation but the apostrophe removed), each word's rank looked up in the word
index (1: the most frequent word of the training split), shifted by `index_from` after the
start mark, capped to the vocabulary and padded or truncated to `max_len`, never dropped. The
preprocess stage builds the word index from the training split (not the validation or test
texts) and keeps it beside the splits, where a served model reads it.

The classes are the label column's values, sorted (as numbers when every one is an integer;
`01` and `1` are two classes, ordered by their text), the same order in every process; the
file is split into train and test by a seeded shuffle (`test_split`, `split_seed`), then the
validation share is held out of train; with `stratify`, each hold-out is drawn class by class
(`prepared.class_quotas`), so that a rare class is in every split.
Every row is a sample: an empty text or label, a missing column, a column (or a JSON key)
named twice and a file that is not UTF-8 are errors naming the file and line. What an
operating system leaves beside the table (`.DS_Store`, `._notes.csv`) is passed over.
"""

from __future__ import annotations

import csv
import json
import logging
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Optional, Protocol

import numpy as np

from pipeline.data import archives, prepared
from pipeline.data import survey as survey_
from pipeline.data.splits import Splitting, split_order
from pipeline.errors import DataError
from pipeline.io import reading
from pipeline.kinds import labelled_texts
from pipeline.kinds.labelled_texts import INDEX_FROM, WORD_INDEX_NAME, LabelledTextsFacts, TextEncoding

if TYPE_CHECKING:
    from pipeline.data.prepared import Prepared
    from pipeline.kinds.labelled_texts import Side, TextTablePreprocessConfig

PAD, START, OOV = 0, 1, 2
# Keras' `text_to_word_sequence` filters: what separates words besides whitespace
WORD_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'
TABLE_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
log = logging.getLogger("pipeline")
INTEGER = re.compile(r"[+-]?[0-9]+")  # ASCII digits: "²" is a digit to str.isdigit, not to int()


def pad(sequences: list[np.ndarray], max_len: int, padding: str, truncating: str) -> np.ndarray:
    """Pad with 0 and truncate to `max_len`, on the 'pre' or 'post' side (Keras semantics)."""
    out = np.zeros((len(sequences), max_len), dtype=np.int32)
    for i, seq in enumerate(sequences):
        seq = seq[-max_len:] if truncating == "pre" else seq[:max_len]
        if padding == "pre":
            out[i, max_len - len(seq) :] = seq
        else:
            out[i, : len(seq)] = seq
    return out


class Encoding(Protocol):
    """How a newswire's word ranks become the ids a model reads: preprocess.reuters' keys, or a
    served model's copy of them (its settings)."""

    @property
    def index_from(self) -> int: ...
    @property
    def skip_top(self) -> int: ...
    @property
    def max_len(self) -> int: ...
    @property
    def padding(self) -> Side: ...
    @property
    def truncating(self) -> Side: ...


def index_sequence(ranks: np.ndarray, cfg: Encoding, vocab_size: int) -> np.ndarray:
    """Word ranks -> the ids the model reads: the start mark, ranks shifted by `index_from`,
    then `in_vocabulary`, as Keras' load_data."""
    return in_vocabulary(np.concatenate(([START], np.asarray(ranks, dtype=np.int64) + cfg.index_from)), cfg, vocab_size)


def in_vocabulary(ids: np.ndarray, cfg: Encoding, vocab_size: int) -> np.ndarray:
    """Ids outside [skip_top, vocab_size) become the out-of-vocabulary mark."""
    ids = np.asarray(ids, dtype=np.int64)
    return np.where((ids >= cfg.skip_top) & (ids < vocab_size), ids, OOV)


def words(text: str) -> list[str]:
    """A newswire's words as Keras split the dataset's texts."""
    return text.lower().translate(str.maketrans(WORD_FILTERS, " " * len(WORD_FILTERS))).split()


def encode_texts(texts: list[str], word_index: dict[str, int], cfg: Encoding, vocab_size: int) -> np.ndarray:
    """Texts -> int32 [n, max_len], as the prepared splits hold them. A word the index lacks
    gets a rank past the vocabulary, so that `index_sequence` marks it out-of-vocabulary."""
    unknown = vocab_size
    ranks = [np.array([word_index.get(w, unknown) for w in words(t)], dtype=np.int64) for t in texts]
    return pad([index_sequence(r, cfg, vocab_size) for r in ranks], cfg.max_len, cfg.padding, cfg.truncating)


def texts(sequences, word_index: dict[str, int], index_from: int) -> list[str]:
    """Sequences as the splits hold them, back to text: each id's word, the padding, start and
    out-of-vocabulary marks left out (`encode_texts` of the text gives the sequence again
    whenever it holds no out-of-vocabulary mark)."""
    by_id = labelled_texts.words_by_id(word_index, index_from)
    return [" ".join(by_id[i] for i in np.asarray(seq).tolist() if i in by_id) for seq in sequences]


def encode_sequences(sequences: list, cfg: Encoding, vocab_size: int) -> np.ndarray:
    """Sequences as Keras' load_data gives them (start mark, shifted ids, any length, padded or
    not) -> int32 [n, max_len], through `in_vocabulary` as the splits' were. Padding (0) stays
    padding."""
    kept = [np.asarray(s, np.int64) for s in sequences]
    return pad(
        [np.where(s == PAD, PAD, in_vocabulary(s, cfg, vocab_size)) for s in kept],
        cfg.max_len,
        cfg.padding,
        cfg.truncating,
    )


class Lengths:
    """The texts' lengths in ids (the start mark included), summed as they stream by."""

    def __init__(self, max_len: int):
        self.max_len, self.n, self.total, self.longest, self.truncated = max_len, 0, 0, 0, 0

    def add(self, length: int) -> None:
        self.n += 1
        self.total += length
        self.longest = max(self.longest, length)
        self.truncated += length > self.max_len

    def stats(self) -> dict:
        return {
            "length_mean": self.total / self.n if self.n else 0.0,
            "length_max": int(self.longest),
            "truncated_fraction": self.truncated / self.n if self.n else 0.0,
        }


def sequence_facts(lengths: Lengths, enc: Encoding, vocab_size: int, word_index: str) -> LabelledTextsFacts:
    """The facts the description holds of a dataset of texts besides the common ones: the
    vocabulary and encoding (`encode_texts`'s keys), the lengths, and the word index's file name."""
    encoding = TextEncoding(
        index_from=enc.index_from, padding=enc.padding, skip_top=enc.skip_top, truncating=enc.truncating
    )
    return LabelledTextsFacts(
        vocab_size=int(vocab_size), max_len=enc.max_len, **lengths.stats(), encoding=encoding, word_index=word_index
    )


# --------------------------------------------------------------------------- a table of texts


def find_table(
    raw_dir: Path | str,
    suffixes: Mapping[str, str] = TABLE_SUFFIXES,
    what: str = ".csv or .jsonl file of labelled texts",
) -> Path:
    """The one file of the download folder, or of a folder in it (where the download stage copies
    a file:// URL that names a folder), whose suffix is one of `suffixes` (by default a CSV or JSON
    Lines file); what an operating system leaves there (`archives.left_by_os`: `.DS_Store`,
    macOS' `._notes.csv`, `__MACOSX/`) is passed over. `what`: the file, as the error says it."""
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        raise DataError(f"{raw_dir}: missing; run the download stage first")
    passed_over = archives.PassedOver()
    found = []
    for path in sorted(raw_dir.iterdir()):
        if path.is_dir() and not passed_over(path.name + "/"):
            inside = sorted(p for p in path.iterdir() if not p.is_dir())
            found += [p for p in inside if not passed_over(f"{path.name}/{p.name}") and p.suffix.lower() in suffixes]
        elif not path.is_dir() and not passed_over(path.name) and path.suffix.lower() in suffixes:
            found.append(path)
    passed_over.log(log, raw_dir)
    if len(found) != 1:
        names = "" if not found else ": " + ", ".join(str(p.relative_to(raw_dir)) for p in found)
        raise DataError(f"{raw_dir}: expected one {what} (in it, or in a folder in it), found {len(found)}{names}")
    return found[0]


def records(path: Path, suffixes: Mapping[str, str] = TABLE_SUFFIXES) -> Iterator[tuple[int, dict]]:
    """(line, row) of every row of a CSV (values as text) or JSON Lines file, in the file's order,
    read as a stream (one line at a time): each checked as a row (fields, keys once, UTF-8)."""
    with open(path, "rb") as handle:
        lines = _utf8_lines(path, handle)
        yield from _csv_rows(path, lines) if suffixes[path.suffix.lower()] == "csv" else _jsonl_rows(path, lines)


def table_rows(path: Path, text_column: str, label_column: str) -> Iterator[tuple[str, str]]:
    """(text, label) of every row, in the file's order, read as a stream (one line at a time):
    each checked, an error naming the file and line otherwise."""
    empty = True
    for line, row in records(path):
        for column in (text_column, label_column):
            if column not in row:
                raise DataError(f"{path}:{line}: no column {column!r} (its columns: {', '.join(map(str, row))})")
        value, label = row[text_column], row[label_column]
        if not isinstance(value, str) or not words(value):
            raise DataError(f"{path}:{line}: {text_column}: expected a text of words, got {json.dumps(value)[:40]}")
        found = label_of(label)
        if found is None:
            raise DataError(
                f"{path}:{line}: {label_column}: expected a label (text or integer), got {json.dumps(label)}"
            )
        empty = False
        yield value, found
    if empty:
        raise DataError(f"{path}: no texts: expected a header line and a row per text")


def _utf8_lines(path: Path, handle) -> Iterator[str]:
    """The file's lines as text (a BOM at the start dropped), an error naming the line and
    offset of the first byte that is not UTF-8."""
    offset = 0
    for number, raw in enumerate(handle, 1):
        try:
            text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(
                f"{path}:{number}: not UTF-8 text (byte {raw[exc.start]:#04x} at offset {offset + exc.start})"
            ) from None
        offset += len(raw)
        yield text


def _csv_rows(path: Path, lines: Iterator[str]):
    reader = csv.DictReader(lines)
    with reading(path, "not a CSV file"):
        columns = reader.fieldnames or []  # the header line, read
    twice = next((c for i, c in enumerate(columns) if c in columns[:i]), None)
    if twice is not None:  # DictReader would keep the last one's values alone
        raise DataError(f"{path}:{reader.line_num}: two columns named {twice!r}; expected each column once")
    while True:
        with reading(path, "not a CSV file"):  # a row at a time: no yield inside `reading`
            row = next(reader, None)
        if row is None:
            return
        if None in row or None in row.values():
            raise DataError(
                f"{path}:{reader.line_num}: expected {len(reader.fieldnames or ())} fields, got another number"
            )
        yield reader.line_num, row


def _jsonl_rows(path: Path, lines: Iterator[str]):
    for line, content in enumerate(lines, 1):
        if not content.strip():
            continue
        try:
            row = json.loads(content, object_pairs_hook=_once)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{line}: not JSON: {exc.msg}") from None
        except _Twice as twice:  # json.loads would keep the last one's value alone
            raise DataError(f"{path}:{line}: two keys named {twice.args[0]!r}; expected each key once") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}:{line}: expected a JSON object per line, got {json.dumps(row)[:40]}")
        yield line, row


class _Twice(Exception):
    """A JSON object with a key twice (its name)."""


def _once(pairs: list) -> dict:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise _Twice(next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i])))
    return found


def label_of(value: object) -> Optional[str]:
    """A label as a class name (a text or an integer, its spaces stripped), or None when there is
    none (empty, a boolean, a number that is not an integer, anything else)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        return None
    return str(value).strip()


def class_order(labels: set[str]) -> list[str]:
    """The classes: the labels sorted, as numbers when every one is an integer (2 before 10),
    labels equal as numbers but written apart (`01` and `1`) distinct classes, ordered by their
    text; so the same order whatever the set's (PYTHONHASHSEED's) order."""
    if all(INTEGER.fullmatch(label) for label in labels):
        return sorted(labels, key=lambda label: (int(label), label))
    return sorted(labels)


class _Words:
    """Word counts of the training texts, streamed in the file's order: ranks from 1 by falling
    count, ties by the training split's order (the word seen first in the split first), as
    Keras published Reuters' word index."""

    def __init__(self):
        self.counts: Counter[str] = Counter()
        self.first: dict[str, tuple[int, int]] = {}  # (the text's place, the word's place in it)

    def add(self, place: int, text: str) -> None:
        for i, word in enumerate(words(text)):
            self.counts[word] += 1
            seen = self.first.get(word)
            if seen is None or (place, i) < seen:
                self.first[word] = (place, i)

    def index(self) -> dict[str, int]:
        ranked = sorted(self.counts, key=lambda w: (-self.counts[w], self.first[w]))
        return {word: rank for rank, word in enumerate(ranked, 1)}


def prepare(raw_dir: Path | str, out: Path | str, cfg: TextTablePreprocessConfig, where: str) -> Prepared:
    """The download folder -> the prepared folder `out`, streamed: every reader's entry point.
    Three passes over the table, none holding its texts: the labels (so the classes and the
    split), the training texts' words (so the word index), then each text encoded into its
    split's shards."""
    path = find_table(raw_dir)
    labels_ = [label for _, label in table_rows(path, cfg.text_column, cfg.label_column)]
    classes = class_order(set(labels_))
    if len(classes) < 2:
        raise DataError(f"{path}: {cfg.label_column}: one label ({classes[0]!r}); expected two or more")
    position = {c: i for i, c in enumerate(classes)}
    places = split_places(len(labels_), cfg, np.array([position[label] for label in labels_]) if cfg.stratify else None)
    counter = _Words()
    for row, (text, _) in enumerate(table_rows(path, cfg.text_column, cfg.label_column)):
        split, place = places[row]
        if split == "train":
            counter.add(place, text)
    word_index = counter.index()
    enc = SimpleNamespace(
        index_from=INDEX_FROM, skip_top=0, max_len=cfg.max_len, padding=cfg.padding, truncating=cfg.truncating
    )
    vocab_size = cfg.num_words or len(word_index) + INDEX_FROM + 1  # the rarest word's id, and one
    lengths = Lengths(cfg.max_len)
    with prepared.Writer(out) as writer:
        sizes = Counter(split for split, _ in places)
        splits = {
            name: writer.split(name, sizes[name], (cfg.max_len,), labelled_texts.FORM, len(classes))
            for name in ("train", "val", "test")
        }
        for row, (text, label) in enumerate(table_rows(path, cfg.text_column, cfg.label_column)):
            split, place = places[row]
            lengths.add(len(words(text)) + 1)
            splits[split].add(place, position[label], encode_texts([text], word_index, enc, vocab_size)[0])
        return writer.finish(
            {name: split.close() for name, split in splits.items()},
            input_=labelled_texts.FORM,
            shape=(cfg.max_len,),
            class_names=classes,
            facts=sequence_facts(lengths, enc, vocab_size, WORD_INDEX_NAME),
            assets={WORD_INDEX_NAME: word_index},
        )


def split_places(n: int, cfg: Splitting, labels: Optional[np.ndarray] = None) -> list[tuple[str, int]]:
    """Each row's (split, place in it), as `split_order` splits the rows: the order a seeded
    shuffle gives, the test share last, the validation share held out of the rest (each class
    apart, with the rows' `labels`)."""
    order, n_train_all, train_idx, val_idx = split_order(n, cfg, labels)
    places: list[tuple[str, int]] = [("", 0)] * n
    for place, i in enumerate(train_idx):
        places[order[i]] = ("train", place)
    for place, i in enumerate(val_idx):
        places[order[i]] = ("val", place)
    for place, row in enumerate(order[n_train_all:]):
        places[row] = ("test", place)
    return places


# --------------------------------------------------------------------------- what `pipeline add` reads

# the sequence length: this percentile of the texts' lengths in words (the start mark included)
# rounded up to a multiple of LENGTH_STEP, within MAX_LEN_BOUNDS
LENGTH_PERCENTILE, LENGTH_STEP, MAX_LEN_BOUNDS = 99, 8, (8, 1000)
# the vocabulary: every word of the texts (scikit-learn's vectorizers' min_df 1: a word the
# training split holds once may be the test split's too), at most MAX_WORDS, the most frequent:
# the bag's width, so its memory, is bounded
MAX_WORDS = 100_000
# the text template's linear SVM: its penalty, as scikit-learn's LinearSVC's C (its default), made
# the L2 penalty of the model's kernel from the training texts' number (`svm_l2`)
SVM_C = 1.0


def svm_l2(texts: int, c: float = SVM_C) -> float:
    """The L2 penalty on a Keras kernel that, with the mean squared hinge over `texts` training
    texts, is liblinear's objective with penalty `c` (1/2 |w|^2 + c x the sum of the losses,
    divided by c x texts): 1 / (2 c texts), to two significant digits."""
    return float(f"{1.0 / (2.0 * c * max(texts, 1)):.2g}")


def survey(raw_dir: Path | str, cfg: TextTablePreprocessConfig) -> list[survey_.Choice]:
    """The settings `pipeline add` chooses for a table of texts, from one pass over its rows (each
    checked as preprocess checks it): the sequence length, the vocabulary, the linear model's L2
    penalty (from the training texts' number, as the section's test and validation shares leave
    it); and the classes' spread, reported beside the template's class_weight."""
    path = find_table(raw_dir)
    lengths: Counter[int] = Counter()
    labels: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for text, label in table_rows(path, cfg.text_column, cfg.label_column):
        found = words(text)
        counts.update(found)
        lengths[len(found) + 1] += 1
        labels[label] += 1
    if len(labels) < 2:
        raise DataError(f"{path}: {cfg.label_column}: one label ({next(iter(labels))!r}); expected two or more")
    rows = sum(lengths.values())
    at = _percentile(lengths, LENGTH_PERCENTILE)
    max_len = min(max(-(-at // LENGTH_STEP) * LENGTH_STEP, MAX_LEN_BOUNDS[0]), MAX_LEN_BOUNDS[1])
    why = (
        f"{LENGTH_PERCENTILE}% of the {rows:,} texts have {at:,} words or fewer, the longest {max(lengths):,} "
        f"(the start mark counted)" + (f", rounded up to a multiple of {LENGTH_STEP}" if max_len > at else "")
    )
    kept = min(len(counts), MAX_WORDS)
    vocabulary = (
        f"the texts hold {len(counts):,} words"
        + (f", at most {MAX_WORDS:,}: the {kept:,} most frequent" if kept < len(counts) else ": every one")
        + f", after ids 0 to {INDEX_FROM} for the marks"
    )
    training = round(rows * (1 - cfg.test_split) * (1 - cfg.validation_split))
    l2 = svm_l2(training)
    return [
        survey_.Choice("preprocess.max_len", max_len, why),
        # ids below num_words are kept: the marks (0 to INDEX_FROM - 1), then the words by rank from INDEX_FROM + 1
        survey_.Choice("preprocess.num_words", kept + INDEX_FROM + 1, vocabulary),
        survey_.Choice(
            "train.mlp.l2", l2, f"about {training:,} training texts: 1 / (2 C n) for a linear SVM's C = {SVM_C:g}"
        ),
        survey_.class_weight(labels, "texts"),
    ]


def _percentile(counts: Counter[int], percent: float) -> int:
    """The smallest value that `percent`% of the counted values are at most."""
    total, seen = sum(counts.values()), 0
    for value in sorted(counts):
        seen += counts[value]
        if seen * 100 >= total * percent:
            return value
    return max(counts)
