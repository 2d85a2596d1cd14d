"""The prepared-data format shared by preprocess, train, evaluate, bench, selftest, tune and
the served model's input example: each split as shards of fixed-length records on disk, and
the folder's description (stats.json), written and read here alone.

A record is one sample and its label in the split's dtype, little-endian: `[label, *sample]`,
uint8 for pictures (at most 256 classes), int32 for sequences, so every record of a split has
the same length and `tf.data.FixedLengthRecordDataset` streams the shards natively and in
parallel (`pipeline.data.inputs`), with no decoding library; a worker of a multi-worker
training reads its own records and no others. A shard holds at most `SHARD_BYTES`; the
description records each shard's file, sample count and sha256, which every reader checks
before it streams a split, so a shard that is missing, cut short or corrupt is one error
naming it, never a silent wrong answer.

The writer (`SplitWriter`) never holds a split: samples come in any order with their place
in the split, are spilled to one file per shard, and each shard is put in order alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Optional, TypeVar, Union

import numpy as np

from pipeline.errors import DataError
from pipeline.io import atomic_dir, file_sha256, read_json, write_json
from pipeline.kinds.known import FORMS

if TYPE_CHECKING:
    from pipeline.kinds.kind import Kind

# the class of a kind's facts (`Kind.facts`), which a description holds
F = TypeVar("F")

SPLITS = ("train", "val", "test")
DESCRIPTION = "stats.json"
FORMAT = "fixed-length-records/1"
# a shard's size at most: large enough that reading one is a stream, small enough that putting
# one in order (the writer) and checking one costs little memory
SHARD_BYTES = 64 << 20


CHUNK_BYTES = 4 << 20  # read at once by the NumPy readers and the writer, whatever a record's size


@dataclass(frozen=True)
class Shard:
    file: str  # its name in the prepared folder
    samples: int
    sha256: str


@dataclass(frozen=True)
class Split:
    samples: int
    class_counts: list[int]
    shards: tuple[Shard, ...]


@dataclass(frozen=True)
class Prepared(Generic[F]):
    """A prepared folder's description: what its samples are (`input`: its kind's form, as
    `pipeline.kinds.FORMS` has it; their shape and dtype), the classes, each split's shards, and
    the kind's own facts (`facts`, of its kind's class, `Kind.facts`: a vocabulary and encoding,
    an image size and colour, a table's columns)."""

    folder: Path
    input: str
    shape: tuple[int, ...]
    class_names: list[str]
    splits: dict[str, Split]
    facts: F

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def kind(self) -> Kind:
        """The kind of dataset whose form its samples are."""
        return FORMS[self.input]

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.kind.dtype).newbyteorder("<")

    @property
    def label_dtype(self) -> str:
        """The labels' dtype as read: the records' own when it is an integer's, else int32 (a class
        index held exactly in a float32 record)."""
        return self.kind.dtype if np.dtype(self.kind.dtype).kind in "iu" else "int32"

    @property
    def record_values(self) -> int:
        return 1 + math.prod(self.shape)

    @property
    def record_bytes(self) -> int:
        return self.record_values * self.dtype.itemsize

    def samples(self, split: str) -> int:
        return self.split(split).samples

    def split(self, name: str) -> Split:
        if name not in self.splits:
            raise DataError(f"{self.folder / DESCRIPTION}: no split {name!r}; run the preprocess stage")
        return self.splits[name]

    def shard_paths(self, split: str) -> list[Path]:
        return [self.folder / s.file for s in self.split(split).shards]

    def check(self, *splits: str, digests: bool = True) -> None:
        """Every shard of `splits` there, of its recorded length and (with `digests`) sha256:
        a DataError naming the first that is not."""
        for name in splits:
            for shard in self.split(name).shards:
                path = self.folder / shard.file
                expected = shard.samples * self.record_bytes
                if not path.is_file():
                    raise DataError(f"{path}: missing; run the preprocess stage again")
                size = path.stat().st_size
                if size != expected:
                    what = "cut short" if size < expected else "longer than recorded"
                    raise DataError(
                        f"{path}: {what} ({size} bytes, expected {expected}); run the preprocess stage again"
                    )
                if digests:
                    found = file_sha256(path)
                    if found != shard.sha256:
                        raise DataError(_corrupt(path, found, shard))

    def chunks(self, split: str, limit: Optional[int] = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(x, y) of a split's samples, a few thousand at a time, in order (at most `limit`):
        for what reads a split on the NumPy side (a digest, an input example)."""
        left = self.samples(split) if limit is None else min(limit, self.samples(split))
        for path in self.shard_paths(split):
            with open(path, "rb") as handle:
                while left > 0:
                    count = min(max(1, CHUNK_BYTES // self.record_bytes), left)
                    values = np.fromfile(handle, dtype=self.dtype, count=count * self.record_values)
                    if values.size == 0:
                        break
                    records = values.reshape(-1, self.record_values)
                    left -= len(records)
                    yield records[:, 1:].reshape(-1, *self.shape), records[:, 0].astype(self.label_dtype)

    def head(self, split: str, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The first `count` samples of a split, as arrays."""
        parts = list(self.chunks(split, count))
        if not parts:
            return np.zeros((0, *self.shape), self.kind.dtype), np.zeros(0, self.label_dtype)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def tap(self, split: str) -> SplitTap:
        """A SplitTap of `split`: what `digest` and `check` find, from the records a reader streams."""
        return SplitTap(self, split)

    def digest(self, split: str) -> tuple[str, np.ndarray]:
        """(sha256 of a split's samples then labels, each with its type and shape, as a short
        hex: the same figure whatever the shards, so runs compare on the same data; the
        labels), in one pass: the shards' recorded bytes fed to a SplitTap, which also checks
        each against its sha256."""
        tap = self.tap(split)
        per_read = max(1, CHUNK_BYTES // self.record_bytes) * self.record_bytes
        for shard in self.split(split).shards:
            left = shard.samples * self.record_bytes
            with open(self.folder / shard.file, "rb") as handle:
                while left > 0 and (chunk := handle.read(min(per_read, left))):
                    tap.update_bytes(chunk)
                    left -= len(chunk)
        return tap.finish()

    def class_weights(self, split: str = "train") -> list[float]:
        """Each class's "balanced" weight (scikit-learn's formula): n / (classes x the class's
        count), of `split`'s n samples. The counts are the description's, which the split's
        writer counted of the labels it wrote (the shards are checked against their sha256
        before a training reads them), so no pass over the shards. A class with no sample in
        the split has no such weight (n / 0), and a weight of 0 would drop it silently: a
        DataError naming it (`stratify: true` in the preprocess section keeps every class of
        two samples or more in each split, and one of a single sample in training)."""
        counts, n = self.split(split).class_counts, self.samples(split)
        path = self.folder / DESCRIPTION
        if len(counts) != self.num_classes:
            raise DataError(f"{path}: {split}: {len(counts)} class counts for {self.num_classes} classes")
        missing = [name for name, count in zip(self.class_names, counts) if count == 0]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise DataError(
                f"{path}: class {missing[0]!r}{more} has no sample in the {split} split, so no balanced class weight "
                f"(n / (classes x its count)); prepare the data with stratify: true, which keeps every class "
                f"in training, or train with class_weight: none"
            )
        return [n / (len(counts) * count) for count in counts]

    def shards_digest(self, split: str) -> str:
        """sha256 of a split's shard digests, as a short hex: from the description alone."""
        lines = "".join(f"{s.file} {s.sha256}\n" for s in self.split(split).shards)
        return hashlib.sha256(lines.encode()).hexdigest()[:32]

    def to_json(self) -> dict:
        """stats.json: the description, with the kind's facts beside the common keys."""
        facts: Any = self.facts  # an instance of the kind's dataclass
        return {
            "format": FORMAT,
            "input": self.input,
            "shape": list(self.shape),
            "num_classes": self.num_classes,
            "class_names": self.class_names,
            **dataclasses.asdict(facts),
            "samples": {k: s.samples for k, s in self.splits.items()},
            "class_counts": {k: s.class_counts for k, s in self.splits.items()},
            "shards": {k: [vars(shard) for shard in s.shards] for k, s in self.splits.items()},
        }


COMMON_KEYS = ("format", "input", "shape", "num_classes", "class_names", "samples", "class_counts", "shards")


def read(folder: Path | str) -> Prepared[Any]:
    """The description of a prepared folder (stats.json), checked for what it must hold: a
    DataError naming the file otherwise (an older format among them), or naming the key of its
    kind's facts that is missing, unknown or not of its type."""
    folder = Path(folder)
    path = folder / DESCRIPTION
    if not path.is_file():
        raise DataError(f"{path}: missing; run the preprocess stage first")
    raw = read_json(path)
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        found = raw.get("format") if isinstance(raw, dict) else None
        raise DataError(
            f"{path}: expected prepared data of format {FORMAT!r}, got {found!r} "
            "(an older version wrote it); run the preprocess stage"
        )
    try:
        splits = {
            name: Split(
                int(raw["samples"][name]),
                [int(c) for c in raw["class_counts"][name]],
                tuple(Shard(str(s["file"]), int(s["samples"]), str(s["sha256"])) for s in shards),
            )
            for name, shards in raw["shards"].items()
        }
        input_ = str(raw["input"])
        shape = tuple(int(d) for d in raw["shape"])
        class_names = [str(c) for c in raw["class_names"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(f"{path}: not a prepared folder's description ({type(exc).__name__}: {exc})") from None
    if input_ not in FORMS:
        raise DataError(f"{path}: input: expected {' or '.join(map(repr, FORMS))}, got {input_!r}")
    for name, split in splits.items():
        if sum(s.samples for s in split.shards) != split.samples:
            raise DataError(f"{path}: {name}: its shards hold another number of samples than {split.samples}")
    facts = _facts(FORMS[input_].facts, {k: v for k, v in raw.items() if k not in COMMON_KEYS}, path)
    return Prepared(folder, input_, shape, class_names, splits, facts)


def _facts(cls: type, raw: Any, path: Path, where: str = "") -> Any:
    """`raw`, the description's facts (or a mapping in them, at `where`), as `cls`, a frozen
    dataclass of the kind's module: every field's key there, of the field's type, and no other."""
    if not isinstance(raw, dict):
        raise DataError(f"{path}: {where[:-1]}: expected a mapping, got {raw!r:.60}; run the preprocess stage again")
    names = [f.name for f in dataclasses.fields(cls)]
    for key in raw:
        if key not in names:
            raise DataError(
                f"{path}: {where}{key}: unknown (expected {', '.join(names)}); run the preprocess stage again"
            )
    hints = typing.get_type_hints(cls)
    values = {}
    for name in names:
        if name not in raw:
            raise DataError(f"{path}: {where}{name}: missing; run the preprocess stage again")
        values[name] = _fact(hints[name], raw[name], path, where + name)
    return cls(**values)


# what a fact of each type is, as an error says it
_EXPECTED = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a list"}


def _fact(hint: Any, value: Any, path: Path, key: str) -> Any:
    """`value`, the fact at `key`, as it is when it is of the type `hint` (a nested dataclass's
    mapping as that class), else a DataError naming the key: so a description is written again
    as it was read, byte for byte."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _facts(hint, value, path, key + ".")
    if origin is Union:  # Optional, or classes told apart by their `type` (a table's columns)
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) > 1:
            tag = value.get("type") if isinstance(value, dict) else None
            options = [a for a in options if tag in typing.get_args(typing.get_type_hints(a)["type"])]
        if len(options) == 1:
            return _fact(options[0], value, path, key)
        expected = "a mapping whose type is known"
    elif origin is typing.Literal:
        if value in args:
            return value
        expected = " or ".join(map(repr, args))
    elif origin in (list, dict):
        if isinstance(value, list) and origin is list:
            return [_fact(args[0], v, path, f"{key}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict) and origin is dict:
            return {k: _fact(args[1], v, path, f"{key}.{k}") for k, v in value.items()}
        expected = _EXPECTED.get(origin, "a mapping")
    else:
        # a whole number where a number is expected is kept as it is (true is no number)
        if isinstance(value, (int, float) if hint is float else hint) and isinstance(value, bool) == (hint is bool):
            return value
        expected = _EXPECTED[hint]
    raise DataError(f"{path}: {key}: expected {expected}, got {value!r:.60}; run the preprocess stage again")


class SplitTap:
    """A split's records seen once, as the reader that feeds a model streams them, in order (the
    evaluate stage's input: `inputs.make_dataset(tap=...)`): each shard checked against its
    sha256, and the split's digest and labels, as `Prepared.check` and `Prepared.digest` give
    them, with no read of the shards of its own. `finish` once the stream has ended."""

    def __init__(self, prepared: Prepared, split: str):
        self.prepared, self.name = prepared, split
        self.shards = list(prepared.split(split).shards)
        self.x_dtype = prepared.dtype.newbyteorder("=")
        n = prepared.samples(split)
        self._digest = hashlib.sha256(f"{self.x_dtype.str}{(n, *prepared.shape)}".encode())
        self._labels: list[np.ndarray] = []
        self._shard, self._left, self._file = -1, 0, hashlib.sha256()
        self._wrong: Optional[str] = None
        self._next_shard()

    def _next_shard(self) -> None:
        """The shard before is complete: checked; then on to the next with records."""
        if 0 <= self._shard < len(self.shards) and self._wrong is None:
            shard = self.shards[self._shard]
            found = self._file.hexdigest()
            if found != shard.sha256:
                self._wrong = _corrupt(self.prepared.folder / shard.file, found, shard)
        self._shard += 1
        self._file = hashlib.sha256()
        self._left = self.shards[self._shard].samples if self._shard < len(self.shards) else 0
        if self._shard < len(self.shards) and self._left == 0:
            self._next_shard()

    def update(self, records: np.ndarray) -> np.ndarray:
        """A batch of records (bytes each, as tf.data reads them), passed on unchanged."""
        self.update_bytes(b"".join(records.tolist()))
        return records

    def update_bytes(self, raw: bytes) -> None:
        """Whole records, the next ones of the split, as the shards hold them."""
        size, at = self.prepared.record_bytes, 0
        count = len(raw) // size
        while count > 0 and self._shard < len(self.shards):
            take = min(count, self._left)
            self._file.update(raw[at : at + take * size])
            at, count, self._left = at + take * size, count - take, self._left - take
            if self._left == 0:
                self._next_shard()
        values = np.frombuffer(raw, dtype=self.prepared.dtype).reshape(-1, self.prepared.record_values)
        self._digest.update(np.ascontiguousarray(values[:, 1:], dtype=self.x_dtype).tobytes())
        self._labels.append(values[:, 0].astype(self.prepared.label_dtype))

    def finish(self) -> tuple[str, np.ndarray]:
        """(the digest, the labels), as `Prepared.digest(split)`; a DataError naming the first
        shard whose bytes are not those recorded (or that the stream did not read whole)."""
        if self._wrong is not None:
            raise DataError(self._wrong)
        if self._shard < len(self.shards):
            path = self.prepared.folder / self.shards[self._shard].file
            raise DataError(f"{path}: not read to its end ({self._left} record(s) left)")
        y_all = np.concatenate(self._labels) if self._labels else np.zeros(0, self.prepared.label_dtype)
        digest = self._digest.copy()
        digest.update(f"{np.dtype(self.prepared.label_dtype).str}{y_all.shape}".encode())
        digest.update(y_all.tobytes())
        return digest.hexdigest()[:16], y_all


def _corrupt(path: Path, found: str, shard: Shard) -> str:
    return f"{path}: corrupt (sha256 {found}, {DESCRIPTION} records {shard.sha256}); run the preprocess stage again"


class SplitWriter:
    """One split's shards, written from samples that come in any order, each with its place
    in the split (0 .. n-1, each once). Each sample is spilled to its shard's file with its
    place at once; `close` puts each shard in order, alone: memory stays at one shard."""

    def __init__(self, folder: Path, split: str, n: int, shape: tuple[int, ...], input_: str, num_classes: int):
        self.folder, self.split, self.n, self.shape = Path(folder), split, n, tuple(shape)
        self.dtype = np.dtype(FORMS[input_].dtype).newbyteorder("<")
        self.values = 1 + math.prod(self.shape)
        record = self.values * self.dtype.itemsize
        self.per_shard = max(1, SHARD_BYTES // record)
        self.count = math.ceil(n / self.per_shard)
        self.seen = np.zeros(n, dtype=bool)
        self.counts = np.zeros(num_classes, dtype=np.int64)
        self.num_classes = num_classes
        self._spills: dict[int, Any] = {}

    def _spill(self, shard: int):
        if shard not in self._spills:
            self._spills[shard] = open(self.folder / f".{self.split}-{shard:05d}.spill", "wb")  # noqa: SIM115
        return self._spills[shard]

    def add(self, place: int, label: int, sample: np.ndarray) -> None:
        if self.seen[place]:
            raise ValueError(f"{self.split}: place {place} given twice")
        if tuple(sample.shape) != self.shape or not 0 <= label < self.num_classes:
            raise ValueError(f"{self.split}: a sample of shape {sample.shape}, label {label}")
        self.seen[place] = True
        self.counts[label] += 1
        record = np.empty(self.values, self.dtype)
        record[0] = label
        record[1:] = sample.reshape(-1)
        self._spill(place // self.per_shard).write(np.int64(place).tobytes() + record.tobytes())

    def close(self) -> Split:
        for handle in self._spills.values():
            handle.close()
        if not self.seen.all():
            raise ValueError(f"{self.split}: {int((~self.seen).sum())} of {self.n} places not given")
        shards = []
        entry = np.dtype([("place", "<i8"), ("record", self.dtype, (self.values,))])
        size = self.values * self.dtype.itemsize
        for i in range(self.count):
            spill = self.folder / f".{self.split}-{i:05d}.spill"
            first, name = i * self.per_shard, f"{self.split}-{i:05d}-of-{self.count:05d}.bin"
            samples = min(self.per_shard, self.n - first)
            # each record written at its place, a few thousand read at a time: memory holds
            # those, not the shard
            with open(spill, "rb") as source, open(self.folder / name, "wb") as shard:
                shard.truncate(samples * size)
                while len(items := np.fromfile(source, dtype=entry, count=max(1, CHUNK_BYTES // entry.itemsize))):
                    for place, record in zip(items["place"].tolist(), items["record"]):
                        shard.seek((place - first) * size)
                        shard.write(record.tobytes())
            os.unlink(spill)
            shards.append(Shard(name, samples, file_sha256(self.folder / name)))
        return Split(self.n, self.counts.tolist(), tuple(shards))


class Writer:
    """A prepared folder, written atomically: `split(...)` gives each split's writer, `finish`
    writes the description (the kind's facts among it) and the kind's assets, then the folder
    appears whole."""

    def __init__(self, out: Path | str):
        self.out = Path(out)
        self._context = atomic_dir(out)
        self.tmp: Path = Path()
        self.splits: dict[str, Split] = {}

    def __enter__(self) -> Writer:
        self.tmp = self._context.__enter__()
        return self

    def __exit__(self, *exc) -> Optional[bool]:
        return self._context.__exit__(*exc)

    def split(self, name: str, n: int, shape: tuple[int, ...], input_: str, num_classes: int) -> SplitWriter:
        return SplitWriter(self.tmp, name, n, shape, input_, num_classes)

    def finish(
        self,
        splits: dict[str, Split],
        *,
        input_: str,
        shape: tuple[int, ...],
        class_names: list[str],
        facts: F,
        assets: Optional[dict] = None,
    ) -> Prepared[F]:
        prepared = Prepared(self.out, input_, tuple(shape), list(class_names), splits, facts)
        write_json(self.tmp / DESCRIPTION, prepared.to_json())
        for name, document in (assets or {}).items():
            write_json(self.tmp / name, document)
        return prepared


def write_arrays(
    out: Path | str,
    splits: dict[str, tuple[np.ndarray, np.ndarray]],
    *,
    input_: str,
    class_names: list[str],
    facts: F,
    assets: Optional[dict] = None,
) -> Prepared[F]:
    """A prepared folder from splits in memory ({split: (x, y)}), each in its order: for a
    reader whose source is itself one array file (Keras' Reuters), and for tests."""
    with Writer(out) as writer:
        done = {}
        shape: tuple[int, ...] = ()
        for name, (x, y) in splits.items():
            shape = tuple(x.shape[1:])
            split = writer.split(name, len(y), shape, input_, len(class_names))
            for place, (sample, label) in enumerate(zip(x, y)):
                split.add(place, int(label), sample)
            done[name] = split.close()
        return writer.finish(done, input_=input_, shape=shape, class_names=class_names, facts=facts, assets=assets)
