"""params.yaml -> typed, frozen, validated config objects.

Defaults live in params.yaml only: these classes have no default values, so a key missing
from the file is an error rather than a silent fallback. Loading never imports TensorFlow,
so a config error stops a stage in well under a second and before anything is written.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Sequence, Union

import yaml

from pipeline.errors import ConfigError

DATASETS = ("reuters", "mnist")
STAGES = ("download", "preprocess", "train", "evaluate")


def _spec(expect: Optional[str] = None, check=None, *, help: str):
    """Field metadata: what the key means (`help`, shown by `pipeline params` and in the README's
    table), what a value must be (for messages) and an optional range check. A Literal field
    needs no `expect`: its message lists the type's own values. Every field has a help text:
    params.yaml carries no comments (DVC's `-S` rewrite would drop most of them), so this is
    where each key is documented."""
    return field(metadata={"expect": expect, "check": check, "help": help})


def choices(cls: type, name: str) -> tuple:
    """The values a Literal field of a config class allows, e.g. choices(TrainConfig, "loop")."""
    tp = typing.get_type_hints(cls)[name]
    return typing.get_args(tp)


def _positive_int(help: str):
    return _spec("a positive integer", lambda v: v > 0, help=help)


def _non_negative_int(help: str):
    return _spec("a non-negative integer", lambda v: v >= 0, help=help)


def _fraction(help: str, low_open: bool = False):
    if low_open:
        return _spec("a number in (0, 1)", lambda v: 0.0 < v < 1.0, help=help)
    return _spec("a number in [0, 1)", lambda v: 0.0 <= v < 1.0, help=help)


def _is_sha256(v: str) -> bool:
    return len(v) == 64 and all(c in "0123456789abcdef" for c in v.lower())


def _is_url(v: str) -> bool:
    return v.split("://", 1)[0] in ("http", "https", "file") and "://" in v


# --------------------------------------------------------------------------- download


@dataclass(frozen=True)
class RemoteFile:
    url: str = _spec("an http://, https:// or file:// URL", _is_url,
                     help="Where the file is published; its base name names the downloaded file.")
    sha256: Optional[str] = _spec(
        "a 64-digit hex sha256 or null", _is_sha256,
        help="The file's expected sha256, checked after the download; null: not checked (the "
             "sha256 observed is recorded in the manifest).")


@dataclass(frozen=True)
class DownloadConfig:
    files: tuple[RemoteFile, ...] = _spec(
        "a non-empty list of files", lambda v: len(v) > 0,
        help="The files to fetch, each a url and a sha256. Reuters: Keras' published files (reuters.npz: "
             "the sha256 Keras checks; reuters_word_index.json, for which Keras publishes an md5: the "
             "sha256 of the file that matches it). MNIST: an archive (zip or tar.gz) with train|training and test|testing "
             "folders of digit subfolders of PNG or JPEG images, by default mnist_png.tar.gz.")
    mirror: str = _spec(
        "a URL or an empty string", lambda v: v == "" or _is_url(v),
        help="A download mirror, for offline or firewalled hosts: a base URL (http, https or file) "
             "under which each file is looked up by its URL's base name, e.g. -S "
             "download.reuters.mirror=file:///srv/datasets. The environment variable "
             "PIPELINE_DATA_MIRROR overrides it. Empty: fetch from the files' own URLs.")
    retries: int = _non_negative_int(help="Further attempts after a failed download (a dropped connection "
                                          "resumes where it stopped).")
    backoff_seconds: float = _spec("a non-negative number", lambda v: v >= 0,
                                   help="Wait before the first retry; doubled before each next one.")
    timeout_seconds: float = _spec("a positive number", lambda v: v > 0,
                                   help="Network timeout of one connection or read.")


# --------------------------------------------------------------------------- preprocess


@dataclass(frozen=True)
class ReutersPreprocessConfig:
    num_words: Optional[int] = _spec("a positive integer or null", lambda v: v > 0,
                                     help="Vocabulary cap: rarer words become the out-of-vocabulary mark; "
                                          "null keeps every word.")
    skip_top: int = _non_negative_int(help="The most frequent words to mark out-of-vocabulary.")
    max_len: int = _positive_int(help="Sequence length: shorter texts are padded, longer ones truncated "
                                      "(never dropped).")
    padding: Literal["pre", "post"] = _spec(help="The side padding is added on.")
    truncating: Literal["pre", "post"] = _spec(help="The side long texts are cut on.")
    index_from: int = _spec("an integer >= 3 (0 pad, 1 start, 2 out-of-vocabulary)", lambda v: v >= 3,
                            help="Keras' shift of the word indices: 0 is padding, 1 the start mark, "
                                 "2 out-of-vocabulary.")
    test_split: float = _fraction(help="The share held out for testing; Keras' 0.2 gives 8,982 train "
                                       "and 2,246 test texts.", low_open=True)
    split_seed: int = _non_negative_int(help="Shuffle seed of the train/test split; Keras' 113 makes the "
                                             "figures comparable with published ones.")
    validation_split: float = _fraction(help="The share of the training part held out for validation; 0: "
                                             "none (then early stopping cannot monitor a val_* metric).")
    validation_seed: int = _non_negative_int(help="Seed of the validation hold-out.")


@dataclass(frozen=True)
class MnistPreprocessConfig:
    image_size: int = _positive_int(help="The side of every image in pixels (square; else an error naming "
                                         "the file). Colour images are converted to grayscale.")
    validation_split: float = _fraction(help="The share of the training part held out for validation; 0: "
                                             "none (then early stopping cannot monitor a val_* metric).")
    validation_seed: int = _non_negative_int(help="Seed of the validation hold-out.")


# --------------------------------------------------------------------------- train


@dataclass(frozen=True)
class DeviceConfig:
    visible_gpus: Optional[tuple[int, ...]] = _spec(
        "null or a list of GPU indices", lambda v: all(i >= 0 for i in v) and len(set(v)) == len(v),
        help="The GPUs training may use, by index, e.g. [0, 1]; null: every GPU the host has.")
    memory_growth: bool = _spec("true or false", help="Allocate GPU memory as needed rather than all at once.")
    memory_limit_mb: Optional[int] = _spec("a positive integer or null", lambda v: v > 0,
                                           help="Memory limit per GPU (per logical device when the GPU is "
                                                "split); null: no limit.")
    logical_devices: Optional[int] = _spec(
        "a positive integer or null", lambda v: v > 0,
        help="Split the first GPU (needs memory_limit_mb) or, with no GPU, the CPU into this many logical "
             "devices, so N-replica training runs on one card or in CI; null: no split.")
    device_list: Optional[tuple[str, ...]] = _spec(
        "null or a list of device names such as /gpu:0", lambda v: len(v) > 0 and len(set(v)) == len(v),
        help="Replicas on exactly these logical devices, e.g. [\"/gpu:0\", \"/gpu:1\"] (the reference "
             "settings' MirroredStrategy(devices=[...])); null: all of them.")
    intra_op_threads: int = _spec(
        "a non-negative integer (0: TensorFlow's choice)", lambda v: v >= 0,
        help="TensorFlow's threads within one op; 0: TensorFlow's choice (the number of cores). "
             "Several trainings sharing a host divide its cores with this and inter_op_threads.")
    inter_op_threads: int = _spec("a non-negative integer (0: TensorFlow's choice)", lambda v: v >= 0,
                                  help="TensorFlow's threads across independent ops; 0: TensorFlow's choice.")


@dataclass(frozen=True)
class EarlyStoppingConfig:
    monitor: Literal["val_accuracy", "val_loss", "accuracy", "loss"] = _spec(
        help="The column of the per-epoch history watched; val_* needs a validation split.")
    mode: Literal["max", "min"] = _spec(help="Whether the monitored value improves upwards (max) or "
                                              "downwards (min).")
    patience: Optional[int] = _spec("a positive integer or null", lambda v: v > 0,
                                    help="Epochs without an improvement of more than min_delta before "
                                         "training stops; null: never stop early.")
    min_delta: float = _spec("a non-negative number", lambda v: v >= 0,
                             help="The smallest change of the monitored value that counts as an improvement.")
    restore_best_weights: bool = _spec("true or false",
                                       help="true: the model saved and evaluated is the best epoch's, not "
                                            "the last one's.")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = _positive_int(help="Passes over the training set.")
    batch_size_per_replica: int = _positive_int(help="Batch size per replica; the global batch is this "
                                                     "times the replicas in sync.")
    optimizer: Literal["adam", "nadam", "sgd", "rmsprop"] = _spec(
        help="The optimizer, by Keras' own name (keras.optimizers.get).")
    learning_rate: float = _spec("a positive number", lambda v: v > 0, help="The initial learning rate.")
    lr_decay_epochs: tuple[int, ...] = _spec(
        "a list of positive epoch numbers", lambda v: all(e > 0 for e in v),
        help="Step decay: after each of these many epochs the learning rate is multiplied by "
             "lr_decay_factor ([30] with 40 epochs: 30 at the initial rate, 10 at rate x factor); "
             "[]: a constant rate.")
    lr_decay_factor: float = _spec("a number in (0, 1]", lambda v: 0 < v <= 1,
                                   help="The factor of each step of lr_decay_epochs.")
    shuffle_buffer: int = _spec("a non-negative integer (0: the whole training set)", lambda v: v >= 0,
                                help="Shuffle buffer of the input pipeline (a new order every epoch); 0: "
                                     "the whole training set.")
    seed: int = _non_negative_int(help="Seed of weight initialisation and shuffling.")
    strategy: Literal["auto", "mirrored", "multi_worker", "one_device", "default"] = _spec(
        help="The tf.distribute strategy. auto: MultiWorkerMirroredStrategy in a cluster, "
             "MirroredStrategy over several devices, no distribution on one device (a one-replica "
             "MirroredStrategy trains 1.7-2.5x slower here); see README, Devices and strategies.")
    loop: Literal["fit", "custom"] = _spec(
        help="fit: Keras model.fit under strategy.scope(); custom: a strategy.run training loop "
             "(needed for multi-worker training).")
    cross_device_ops: Literal["auto", "nccl", "hierarchical_copy", "reduction_to_one_device"] = _spec(
        help="The all-reduce of MirroredStrategy; auto: NCCL on two or more real GPUs, TensorFlow's "
             "choice elsewhere.")
    num_packs: int = _positive_int(help="Gradient packs of the nccl and hierarchical_copy all-reduce.")
    precision: Literal["float32", "mixed_float16", "mixed_bfloat16"] = _spec(
        help="Keras' dtype policy; the logits stay float32. Mixed precision pays on GPUs with tensor "
             "cores and CPUs with AMX, not on other CPUs.")
    jit_compile: bool = _spec("true or false", help="Compile the step with XLA; slower than plain "
                                                    "TensorFlow on these models on a CPU.")
    steps_per_execution: int = _positive_int(help="Steps run per call into TensorFlow (fit loop only).")
    early_stopping: EarlyStoppingConfig = _spec("a mapping", help="Stop training when the monitored metric "
                                                                  "stops improving.")
    deterministic: bool = _spec("true or false",
                                help="true: seeds for Python, NumPy and TensorFlow and op determinism, for "
                                     "identical reruns (slower).")
    slurm_port_base: int = _spec("a port number 1024-65535", lambda v: 1024 <= v <= 65535,
                                 help="Under Slurm, worker i of a node listens on this port + i (the "
                                      "environment variable PIPELINE_SLURM_PORT_BASE overrides it).")
    devices: DeviceConfig = _spec("a mapping", help="Which devices training uses, and how.")


@dataclass(frozen=True)
class ReutersTrainConfig(TrainConfig):
    model: Literal["reuters_conv1d"] = _spec(
        help="The network: an Embedding, two Conv1D+MaxPool blocks and a Dense of 46 classes.")
    embedding_dim: int = _positive_int(help="Width of the word embedding.")


@dataclass(frozen=True)
class MnistTrainConfig(TrainConfig):
    model: Literal["mobilenet_v2"] = _spec(
        help="The network: MobileNetV2 without top or pretrained weights, global average pooling, "
             "Dense dense_units and a Dense of 10 classes.")
    img_size: int = _spec("an integer >= 32", lambda v: v >= 32,
                          help="Side the images are resized to in the input pipeline (MobileNetV2 needs "
                               "at least 32); the reference settings train at 112.")
    dense_units: int = _positive_int(help="Units of the Dense layer on the pooled features.")
    batchnorm_momentum: float = _fraction(
        help="Moving-average momentum of the backbone's BatchNormalization layers (Keras' 0.999 "
             "leaves inference at chance after a few epochs).", low_open=True)


# --------------------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateConfig:
    batch_size: int = _positive_int(help="Batch size of the evaluation.")
    top_k: Optional[int] = _spec("an integer >= 2 or null", lambda v: v >= 2,
                                 help="Also report top-k accuracy for this k; null: accuracy only.")


SCHEMA: dict[str, dict[str, type]] = {
    "download": {"reuters": DownloadConfig, "mnist": DownloadConfig},
    "preprocess": {"reuters": ReutersPreprocessConfig, "mnist": MnistPreprocessConfig},
    "train": {"reuters": ReutersTrainConfig, "mnist": MnistTrainConfig},
    "evaluate": {"reuters": EvaluateConfig, "mnist": EvaluateConfig},
}


@dataclass(frozen=True)
class DatasetParams:
    """The four stage sections of one dataset, validated, plus the raw values for logging."""

    dataset: str
    download: DownloadConfig
    preprocess: Union[ReutersPreprocessConfig, MnistPreprocessConfig]
    train: Union[ReutersTrainConfig, MnistTrainConfig]
    evaluate: EvaluateConfig
    raw: dict = field(repr=False, compare=False)

    def flat(self) -> dict[str, Any]:
        """Every param of this dataset's stages as flat dotted keys (for MLflow)."""
        out: dict[str, Any] = {}
        for stage in STAGES:
            _flatten(self.raw[stage][self.dataset], f"{stage}.{self.dataset}", out)
        return out


# --------------------------------------------------------------------------- loading


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that rejects a key given twice in one mapping (PyYAML keeps the last)."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            mark = key_node.start_mark
            raise yaml.MarkedYAMLError(
                problem=f"duplicate key {key!r}", problem_mark=mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)


def text_line(data: bytes, offset: int) -> int:
    """The 1-based line of byte `offset`."""
    return data.count(b"\n", 0, offset) + 1


def read_yaml(path: Path) -> Any:
    """Parse a YAML file; errors name the file, and the line and column where known."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        line = text_line(Path(path).read_bytes(), exc.start)
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                          f"{exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = exc.problem or exc.context or "invalid YAML"
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        line = text_line(text.encode("utf-8"), len(text[:exc.position].encode("utf-8")))
        raise ConfigError(f"{path}:{line}: invalid YAML: {exc.reason} {exc.character!r}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None


def load_params(path: Path | str, dataset: str, overrides: Sequence[str] = ()) -> DatasetParams:
    """Load and validate the whole params file, then return one dataset's sections.

    The whole file is checked so that a typo anywhere is caught by the first stage that runs.
    `overrides` are `key=value` assignments applied first, as `dvc exp run -S` applies them.
    """
    path = Path(path)
    if dataset not in DATASETS:
        raise ConfigError(f"unknown dataset {dataset!r}: expected one of {', '.join(DATASETS)}")
    raw = apply_overrides(read_yaml(path), overrides, source=str(path))
    built = validate(raw, source=str(path))
    return DatasetParams(
        dataset=dataset,
        download=built["download"][dataset],
        preprocess=built["preprocess"][dataset],
        train=built["train"][dataset],
        evaluate=built["evaluate"][dataset],
        raw=raw,
    )


def apply_overrides(raw: Any, overrides: Sequence[str], source: str = "params.yaml") -> Any:
    """`raw` with each `key=value` set, the value read as YAML (`-S train.reuters.epochs=3`).

    The key is a dotted path to a value the file has: a typo must not add a key that nothing
    reads (validation then checks the value)."""
    for item in overrides:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        node = raw
        for depth, part in enumerate(parts):
            if not isinstance(node, dict) or part not in node:
                where = ".".join(parts[:depth]) or "the top level"
                hint = difflib.get_close_matches(part, list(node) if isinstance(node, dict) else [], n=1)
                raise ConfigError(f"-S {item}: {source} has no key {part!r} under {where}"
                                  + (f" (did you mean {hint[0]!r}?)" if hint else ""))
            if depth < len(parts) - 1:
                node = node[part]
        if not sep:
            raise ConfigError(f"-S {item}: expected key=value, e.g. train.reuters.epochs=3")
        try:
            node[parts[-1]] = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"-S {item}: the value is not valid YAML: {exc}") from None
    return raw


def set_in_file(path: Path | str, overrides: Sequence[str]) -> None:
    """Apply `key=value` overrides to a params file in place, checked as the stages check it
    (for tools that run the stages on a modified copy of the params)."""
    raw = apply_overrides(read_yaml(Path(path)), overrides, source=str(path))
    validate(raw, source=str(path))
    Path(path).write_text(format_params(raw), encoding="utf-8")


# --------------------------------------------------------------------------- the file's form

PARAMS_HEADER = """\
# Every tunable value of the pipeline, and the only place defaults live; dvc.yaml lists the keys
# each stage reads. What each key means: `pipeline params` (or README.md, Params and experiments).
# Override one for an experiment with `dvc exp run -S train.reuters.epochs=20`. This file is kept
# in the form that command writes, so an override changes one line: an empty value is null, and
# comments other than this header would be lost. After a hand edit: `pipeline params --rewrite`.
"""


def format_params(raw: dict) -> str:
    """The text of a params file holding `raw`, in the form `dvc exp run -S` writes it.

    DVC rewrites the whole file on every `-S` (dvc.utils.hydra.apply_overrides: a ruamel.yaml
    round trip in which every value is assigned anew): flow lists become block lists, null an
    empty value, "" becomes '', lines over 80 columns are wrapped (a long URL goes on a line of
    its own after `url: `), and comments inside or after a list are dropped. Written in that
    form, the file is a fixed point of the rewrite, so an override changes the lines of its
    own value only. This is DVC's writer (ruamel.yaml's round-trip dumper, block style) plus
    the header comment and a blank line between stage sections, both of which DVC keeps."""
    import io

    from ruamel.yaml import YAML

    writer = YAML()
    writer.default_flow_style = False
    stream = io.StringIO()
    writer.dump(raw, stream)
    lines: list[str] = []
    for line in stream.getvalue().splitlines():
        if lines and line[:1] not in ("", " ", "-"):  # a stage section after the first
            lines.append("")
        lines.append(line)
    return PARAMS_HEADER + "\n" + "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- key documentation

DATASET_TITLES = {"reuters": "Reuters", "mnist": "MNIST"}


@dataclass(frozen=True)
class KeyDoc:
    """One key of a params file: its dotted path (as `-S` takes it), value and meaning."""

    key: str
    template: str          # the key with `<ds>` for the dataset and `[]` for list positions
    value: Any
    meaning: str           # empty for the second and later items of a list
    has_value: bool = True  # False for a mapping (its keys follow)


def meaning(cls: type, name: str) -> str:
    """What field `name` of config class `cls` means, with the values it takes."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    expect = f.metadata.get("expect") or _one_of(_unwrap(typing.get_type_hints(cls)[name]))
    text = f.metadata["help"]
    return text if expect == "a mapping" else f"{text} Value: {expect}."


def _unwrap(tp: Any) -> Any:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (Union, types.UnionType) and type(None) in args:
        (tp,) = [a for a in args if a is not type(None)]
    return tp


def describe(raw: dict, datasets: Sequence[str] = DATASETS) -> list[KeyDoc]:
    """Every key of a validated params file, in the file's order, for the given datasets."""
    docs: list[KeyDoc] = []
    for stage, section in raw.items():
        for ds, values in section.items():
            if ds in datasets:
                _describe(SCHEMA[stage][ds], values, f"{stage}.{ds}", f"{stage}.<ds>", docs, True)
    return docs


def _describe(cls: type, values: dict, prefix: str, template: str, docs: list, first: bool) -> None:
    hints = typing.get_type_hints(cls)
    for name, value in values.items():
        tp = _unwrap(hints[name])
        key, tmpl = f"{prefix}.{name}", f"{template}.{name}"
        text = meaning(cls, name) if first else ""
        if dataclasses.is_dataclass(tp):
            docs.append(KeyDoc(key, tmpl, None, text, has_value=False))
            _describe(tp, value, key, tmpl, docs, first)
        elif typing.get_origin(tp) is tuple and dataclasses.is_dataclass(typing.get_args(tp)[0]):
            docs.append(KeyDoc(key, tmpl, f"{len(value)} file{'s' if len(value) != 1 else ''}", text))
            for i, item in enumerate(value):
                _describe(typing.get_args(tp)[0], item, f"{key}.{i}", f"{tmpl}[]", docs, first and i == 0)
        else:
            docs.append(KeyDoc(key, tmpl, value, text))


def show_value(value: Any) -> str:
    """A value as `-S` takes it: null, true, [1, 2], "" for the empty string."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, list):
        return "[" + ", ".join(show_value(v) for v in value) + "]"
    return str(value)


def format_text(docs: Sequence[KeyDoc], width: int = 100) -> str:
    """`pipeline params`: each key and its value on a line, its meaning indented below."""
    import textwrap

    out: list[str] = []
    section = None
    for doc in docs:
        if section is not None and doc.key.split(".")[:2] != section:
            out.append("")
        section = doc.key.split(".")[:2]
        out.append(f"{doc.key}: {show_value(doc.value)}" if doc.has_value else f"{doc.key}:")
        if doc.meaning:
            out.extend(textwrap.wrap(doc.meaning, width=max(width, 40), initial_indent="    ",
                                     subsequent_indent="    ", break_on_hyphens=False))
    return "\n".join(out) + "\n"


def format_markdown(docs: Sequence[KeyDoc]) -> str:
    """The README's table: a row per key (with `<ds>` for the dataset), a column per dataset."""
    rows: dict[str, dict] = {}
    datasets: list[str] = []
    for doc in docs:
        ds = doc.key.split(".")[1]
        if ds not in datasets:
            datasets.append(ds)
        row = rows.setdefault(doc.template, {"values": {}, "meanings": {}, "has_value": doc.has_value})
        if doc.has_value:
            row["values"].setdefault(ds, []).append(_markdown_value(doc.value))
        if doc.meaning:
            row["meanings"][ds] = doc.meaning
    lines = ["| Key | " + " | ".join(DATASET_TITLES.get(d, d) for d in datasets) + " | Meaning |",
             "|---|" + "---|" * len(datasets) + "---|"]
    for template, row in rows.items():
        cells = []
        for ds in datasets:
            values = row["values"].get(ds)
            cells.append("<br>".join(values) if values else ("" if not row["has_value"] else "—"))
        texts = list(dict.fromkeys(row["meanings"].values()))
        text = texts[0] if len(texts) == 1 else " ".join(
            f"{DATASET_TITLES.get(ds, ds)}: {t}" for ds, t in row["meanings"].items())
        lines.append(f"| `{template}` | " + " | ".join(cells) + " | " + text.replace("|", "\\|") + " |")
    return "\n".join(lines) + "\n"


def _markdown_value(value: Any) -> str:
    if isinstance(value, str) and _is_url(value):
        return f"[{value.rstrip('/').rsplit('/', 1)[-1]}]({value})"
    if isinstance(value, str) and _is_sha256(value):
        return f"`{value[:12]}…`"
    return f"`{show_value(value)}`"


def validate(raw: Any, source: str = "params.yaml") -> dict[str, dict[str, Any]]:
    """Build every section of SCHEMA from `raw`; raise ConfigError naming the first bad key."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping of stage sections, got {_show(raw)}")
    _check_keys(raw, SCHEMA.keys(), "", source)
    built: dict[str, dict[str, Any]] = {}
    for stage, per_dataset in SCHEMA.items():
        section = raw[stage]
        if not isinstance(section, dict):
            raise ConfigError(f"{source}: {stage}: expected a mapping of datasets, got {_show(section)}")
        _check_keys(section, per_dataset.keys(), stage, source)
        built[stage] = {
            ds: _build(cls, section[ds], f"{stage}.{ds}", source) for ds, cls in per_dataset.items()
        }
    for ds in DATASETS:
        monitor = built["train"][ds].early_stopping.monitor
        if monitor.startswith("val_") and built["preprocess"][ds].validation_split == 0:
            raise ConfigError(f"{source}: train.{ds}.early_stopping.monitor: {monitor} needs a validation "
                              f"split, and preprocess.{ds}.validation_split is 0: monitor "
                              f"{monitor[4:]} or set a split")
    return built


def _check_keys(mapping: dict, allowed, path: str, source: str) -> None:
    allowed = list(allowed)
    for key in mapping:
        if key not in allowed:
            hint = difflib.get_close_matches(str(key), allowed, n=1)
            did_you_mean = f' (did you mean "{hint[0]}"?)' if hint else f" (expected one of: {', '.join(allowed)})"
            raise ConfigError(f"{source}: {_join(path, key)}: unknown key{did_you_mean}")
    for key in allowed:
        if key not in mapping:
            raise ConfigError(f"{source}: {_join(path, key)}: missing key")


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _build(cls: type, value: Any, path: str, source: str):
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: {path}: expected a mapping, got {_show(value)}")
    fields = dataclasses.fields(cls)
    hints = typing.get_type_hints(cls)
    _check_keys(value, [f.name for f in fields], path, source)
    kwargs = {}
    for f in fields:
        kwargs[f.name] = _convert(value[f.name], hints[f.name], f, _join(path, f.name), source)
    return cls(**kwargs)


def _convert(value: Any, tp: Any, f: dataclasses.Field, path: str, source: str):
    expect = f.metadata.get("expect") or _one_of(tp)
    check = f.metadata.get("check")

    def fail(extra: str = ""):
        raise ConfigError(f"{source}: {path}: expected {expect}, got {_show(value)}{extra}")

    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType) and type(None) in args:
        if value is None:
            return None
        (tp,) = [a for a in args if a is not type(None)]
        origin, args = typing.get_origin(tp), typing.get_args(tp)
    elif value is None:
        fail()

    if dataclasses.is_dataclass(tp):
        return _build(tp, value, path, source)
    if origin is Literal:
        if value not in args or isinstance(value, bool):
            # YAML 1.1 reads on/off/yes/no as booleans: say so, it is a common trap.
            fail(" (YAML reads yes/no/on/off as booleans: quote the value)" if isinstance(value, bool) else "")
        return value
    if origin is tuple:
        if not isinstance(value, list):
            fail()
        item_type = args[0]
        converted = []
        for i, item in enumerate(value):
            item_path = f"{path}[{i}]"
            if dataclasses.is_dataclass(item_type):
                converted.append(_build(item_type, item, item_path, source))
            elif _is_type(item, item_type):
                converted.append(_scalar(item, item_type))
            else:
                raise ConfigError(f"{source}: {item_path}: expected {expect}, got {_show(item)}")
        result = tuple(converted)
    else:
        if not _is_type(value, tp):
            fail()
        result = _scalar(value, tp)
    if check is not None and not check(result):
        fail()
    return result


def _one_of(tp: Any) -> str:
    values = typing.get_args(tp) if typing.get_origin(tp) is Literal else ()
    if not values:
        return "a valid value"
    quoted = [f"'{v}'" for v in values]
    if len(quoted) <= 2:
        return " or ".join(quoted)
    return f"one of {', '.join(quoted[:-1])} or {quoted[-1]}"


def _is_type(value: Any, tp: type) -> bool:
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    return False


def _scalar(value: Any, tp: type):
    return float(value) if tp is float else value


def _show(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, sub in value.items():
            _flatten(sub, f"{prefix}.{key}", out)
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        for i, sub in enumerate(value):
            _flatten(sub, f"{prefix}.{i}", out)
    else:
        out[prefix] = value
