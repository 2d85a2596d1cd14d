"""params.yaml -> typed, frozen, validated config objects.

Defaults live in params.yaml only: these classes have no default values, so a key missing
from the file is an error rather than a silent fallback. Loading never imports TensorFlow,
so a config error stops a stage in well under a second and before anything is written.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, Sequence, Union

import yaml

from pipeline.errors import ConfigError
from pipeline.schema import DATASETS, NUM_CLASSES, SCHEMA, DatasetParams

# --------------------------------------------------------------------------- loading


class ParamsLoader(yaml.SafeLoader):
    """How params files are read: a SafeLoader that rejects a key given twice in one mapping
    (PyYAML keeps the last) and reads YAML 1.2's floats (below)."""


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


ParamsLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)
# YAML 1.2's floats too: PyYAML resolves YAML 1.1's, in which a number with an exponent and no
# point is a string, and that is how `dvc exp run -S` writes small values (0.00004 as 4e-05,
# through ruamel.yaml, which reads it back as a float, as DVC does).
ParamsLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


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
        return yaml.load(text, Loader=ParamsLoader)
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
        tune=built["tune"][dataset],
        serve=built["serve"][dataset],
        promote=built["promote"][dataset],
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


def validate(raw: Any, source: str = "params.yaml", *, spaces: bool = True) -> dict[str, dict[str, Any]]:
    """Build every section of SCHEMA from `raw`; raise ConfigError naming the first bad key.
    `spaces`: also check that every value of each tune.<ds>.space is one train.<ds> accepts."""
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
    _check_across(built, source)
    if spaces:
        from pipeline import search_space

        for ds in DATASETS:
            search_space.check(raw, built["tune"][ds].space, ds, source)
    return built


def _check_across(built: dict, source: str) -> None:
    """What one key's check cannot see: keys that must agree with each other."""
    for ds in DATASETS:
        monitor = built["train"][ds].early_stopping.monitor
        if monitor.startswith("val_") and built["preprocess"][ds].validation_split == 0:
            raise ConfigError(f"{source}: train.{ds}.early_stopping.monitor: {monitor} needs a validation "
                              f"split, and preprocess.{ds}.validation_split is 0: monitor "
                              f"{monitor[4:]} or set a split")
        for key in ("evaluate", "serve"):
            top_k = built[key][ds].top_k
            if top_k is not None and top_k > NUM_CLASSES[ds]:
                raise ConfigError(f"{source}: {key}.{ds}.top_k: expected at most {NUM_CLASSES[ds]} ({ds} has "
                                  f"{NUM_CLASSES[ds]} classes), got {top_k}")
    train = built["train"]["reuters"]
    if len(train.conv_kernel_sizes) != len(train.conv_filters):
        raise ConfigError(f"{source}: train.reuters.conv_kernel_sizes: expected one kernel size per "
                          f"conv_filters ({len(train.conv_filters)}), got {len(train.conv_kernel_sizes)}")


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
    expect = f.metadata.get("expect") or one_of(tp)
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


def unwrap_optional(tp: Any) -> Any:
    """`X` of `Optional[X]` (`X | None`); any other type as it is."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (Union, types.UnionType) and type(None) in args:
        (tp,) = [a for a in args if a is not type(None)]
    return tp


def one_of(tp: Any) -> str:
    values = typing.get_args(tp) if typing.get_origin(tp) is Literal else ()
    if not values:
        return "a valid value"
    quoted = [f"'{v}'" for v in values]
    if len(quoted) <= 2:
        return " or ".join(quoted)
    return f"one of {', '.join(quoted[:-1])} or {quoted[-1]}"


def _is_type(value: Any, tp: type) -> bool:
    if tp is Any:  # a plain YAML value: a scalar, or a list of scalars
        items = value if isinstance(value, list) else [value]
        return all(isinstance(v, (bool, int, float, str)) for v in items)
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
