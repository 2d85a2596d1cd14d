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


def _spec(expect: Optional[str] = None, check=None):
    """Field metadata: what a value must be (for messages) and an optional range check. A
    Literal field needs no `expect`: its message lists the type's own values."""
    return field(metadata={"expect": expect, "check": check})


def choices(cls: type, name: str) -> tuple:
    """The values a Literal field of a config class allows, e.g. choices(TrainConfig, "loop")."""
    tp = typing.get_type_hints(cls)[name]
    return typing.get_args(tp)


def _positive_int():
    return _spec("a positive integer", lambda v: v > 0)


def _non_negative_int():
    return _spec("a non-negative integer", lambda v: v >= 0)


def _fraction(low_open: bool = False):
    if low_open:
        return _spec("a number in (0, 1)", lambda v: 0.0 < v < 1.0)
    return _spec("a number in [0, 1)", lambda v: 0.0 <= v < 1.0)


def _is_sha256(v: str) -> bool:
    return len(v) == 64 and all(c in "0123456789abcdef" for c in v.lower())


def _is_url(v: str) -> bool:
    return v.split("://", 1)[0] in ("http", "https", "file") and "://" in v


# --------------------------------------------------------------------------- download


@dataclass(frozen=True)
class RemoteFile:
    url: str = _spec("an http://, https:// or file:// URL", _is_url)
    sha256: Optional[str] = _spec("a 64-digit hex sha256 or null", _is_sha256)


@dataclass(frozen=True)
class DownloadConfig:
    files: tuple[RemoteFile, ...] = _spec("a non-empty list of files", lambda v: len(v) > 0)
    # Base URL under which each file is looked up by its URL's base name; the environment
    # variable PIPELINE_DATA_MIRROR overrides it. Empty: fetch from the URLs themselves.
    mirror: str = _spec("a URL or an empty string", lambda v: v == "" or _is_url(v))
    retries: int = _non_negative_int()
    backoff_seconds: float = _spec("a non-negative number", lambda v: v >= 0)
    timeout_seconds: float = _spec("a positive number", lambda v: v > 0)


# --------------------------------------------------------------------------- preprocess


@dataclass(frozen=True)
class ReutersPreprocessConfig:
    num_words: Optional[int] = _spec("a positive integer or null", lambda v: v > 0)
    skip_top: int = _non_negative_int()
    max_len: int = _positive_int()
    padding: Literal["pre", "post"] = _spec()
    truncating: Literal["pre", "post"] = _spec()
    index_from: int = _spec("an integer >= 3 (0 pad, 1 start, 2 out-of-vocabulary)", lambda v: v >= 3)
    test_split: float = _fraction(low_open=True)
    split_seed: int = _non_negative_int()
    validation_split: float = _fraction()
    validation_seed: int = _non_negative_int()


@dataclass(frozen=True)
class MnistPreprocessConfig:
    image_size: int = _positive_int()
    validation_split: float = _fraction()
    validation_seed: int = _non_negative_int()


# --------------------------------------------------------------------------- train


@dataclass(frozen=True)
class DeviceConfig:
    # null: every GPU the host has; a list: only those indices.
    visible_gpus: Optional[tuple[int, ...]] = _spec(
        "null or a list of GPU indices", lambda v: all(i >= 0 for i in v) and len(set(v)) == len(v)
    )
    memory_growth: bool = _spec("true or false")
    memory_limit_mb: Optional[int] = _spec("a positive integer or null", lambda v: v > 0)
    # Split the first GPU (or the CPU when there is no GPU) into this many logical devices.
    logical_devices: Optional[int] = _spec("a positive integer or null", lambda v: v > 0)
    # Replicas on exactly these logical devices (e.g. ["/gpu:0", "/gpu:1"]); null: all of them.
    device_list: Optional[tuple[str, ...]] = _spec(
        "null or a list of device names such as /gpu:0", lambda v: len(v) > 0 and len(set(v)) == len(v)
    )
    # TensorFlow's thread pools: within one op, and across independent ops; 0 lets TF choose
    # (the number of cores). Several trainings sharing a host divide its cores with these.
    intra_op_threads: int = _spec("a non-negative integer (0: TensorFlow's choice)", lambda v: v >= 0)
    inter_op_threads: int = _spec("a non-negative integer (0: TensorFlow's choice)", lambda v: v >= 0)


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = _positive_int()
    batch_size_per_replica: int = _positive_int()
    # Keras' own names (keras.optimizers.get).
    optimizer: Literal["adam", "nadam", "sgd", "rmsprop"] = _spec()
    learning_rate: float = _spec("a positive number", lambda v: v > 0)
    # The learning rate is multiplied by lr_decay_factor at each of these epochs (1-based).
    lr_decay_epochs: tuple[int, ...] = _spec(
        "a list of positive epoch numbers", lambda v: all(e > 0 for e in v)
    )
    lr_decay_factor: float = _spec("a number in (0, 1]", lambda v: 0 < v <= 1)
    shuffle_buffer: int = _spec("a non-negative integer (0: the whole training set)", lambda v: v >= 0)
    seed: int = _non_negative_int()
    strategy: Literal["auto", "mirrored", "multi_worker", "one_device", "default"] = _spec()
    # fit: Keras model.fit under strategy.scope(); custom: a strategy.run training loop.
    loop: Literal["fit", "custom"] = _spec()
    # All-reduce implementation for MirroredStrategy; auto picks NCCL on real multi-GPU hosts.
    cross_device_ops: Literal["auto", "nccl", "hierarchical_copy", "reduction_to_one_device"] = _spec()
    num_packs: int = _positive_int()
    precision: Literal["float32", "mixed_float16", "mixed_bfloat16"] = _spec()
    jit_compile: bool = _spec("true or false")
    steps_per_execution: int = _positive_int()
    # Seeds for Python, NumPy and TF plus op determinism: identical reruns, slower.
    deterministic: bool = _spec("true or false")
    # Under Slurm, worker i of a node listens on this port + i (PIPELINE_SLURM_PORT_BASE overrides).
    slurm_port_base: int = _spec("a port number 1024-65535", lambda v: 1024 <= v <= 65535)
    devices: DeviceConfig = _spec("a mapping")


@dataclass(frozen=True)
class ReutersTrainConfig(TrainConfig):
    model: Literal["reuters_conv1d"] = _spec()
    embedding_dim: int = _positive_int()


@dataclass(frozen=True)
class MnistTrainConfig(TrainConfig):
    model: Literal["mobilenet_v2"] = _spec()
    # MobileNetV2 needs at least 32x32 inputs; images are resized in the tf.data pipeline.
    img_size: int = _spec("an integer >= 32", lambda v: v >= 32)
    dense_units: int = _positive_int()
    # Moving-average momentum of the backbone's BatchNormalization layers.
    batchnorm_momentum: float = _fraction(low_open=True)


# --------------------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateConfig:
    batch_size: int = _positive_int()
    # Also report top-k accuracy for this k (null: accuracy only).
    top_k: Optional[int] = _spec("an integer >= 2 or null", lambda v: v >= 2)


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
    Path(path).write_text(yaml.safe_dump(raw, sort_keys=False))


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
