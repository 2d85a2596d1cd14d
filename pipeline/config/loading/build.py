"""A raw params mapping -> the typed, frozen objects of the schema, every key checked: unknown,
missing and mistyped keys, each value's own check, and the keys that must agree with each other.
Errors name the key's dotted path."""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from collections.abc import Sequence
from typing import Any, Literal, Optional, Union

from pipeline.config.loading import datasets
from pipeline.errors import ConfigError


def missing_key(root: Any, parts: Sequence[str]) -> Optional[tuple[int, str]]:
    """Where the dotted path `parts` leaves `root`: None when every key is there, otherwise the
    depth of the first missing one and a did-you-mean (` (did you mean 'x'?)`, or "")."""
    node = root
    for depth, part in enumerate(parts):
        if not isinstance(node, dict) or part not in node:
            hint = difflib.get_close_matches(part, list(node) if isinstance(node, dict) else [], n=1)
            return depth, (f" (did you mean {hint[0]!r}?)" if hint else "")
        node = node[part]
    return None


def sections(raw: Any, source: str = "params.yaml") -> dict[str, dict[str, Any]]:
    """Build every section of SCHEMA from `raw`; raise ConfigError naming the first bad key.
    (The search spaces' values are `search_space.check`'s.)"""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping of stage sections, got {_show(raw)}")
    _check_keys(raw, datasets.STAGE_SECTIONS, "", source)
    for stage in datasets.STAGE_SECTIONS:
        if not isinstance(raw[stage], dict) or not raw[stage]:
            raise ConfigError(f"{source}: {stage}: expected a mapping of datasets, got {_show(raw[stage])}")
    found = datasets.declared(raw, source)
    built: dict[str, dict[str, Any]] = {
        stage: {
            name: _build(dataset.classes()[stage], raw[stage][name], f"{stage}.{name}", source)
            for name, dataset in found.items()
        }
        for stage in datasets.STAGE_SECTIONS
    }
    _check_across(built, source)
    return built


def _check_across(built: dict, source: str) -> None:
    """What one key's check cannot see: keys that must agree with each other. (A top k is
    judged against the classes by the stages that know them, evaluate and serve.)"""
    for ds in built["train"]:
        monitor = built["train"][ds].early_stopping.monitor
        if monitor.startswith("val_") and built["preprocess"][ds].validation_split == 0:
            raise ConfigError(
                f"{source}: train.{ds}.early_stopping.monitor: {monitor} needs a validation "
                f"split, and preprocess.{ds}.validation_split is 0: monitor "
                f"{monitor[4:]} or set a split"
            )
        disagreement = built["train"][ds].disagreement()
        if disagreement:
            raise ConfigError(f"{source}: train.{ds}.{disagreement}")
        settings = built["train"][ds].settings
        if getattr(settings, "weights", None) and not built["download"][ds].pretrained:
            raise ConfigError(
                f"{source}: train.{ds}.{built['train'][ds].model}.weights: {settings.weights} needs the weights "
                f"file, and download.{ds}.pretrained is empty: list it there (url and sha256; docs/own-data.md)"
            )


def _check_keys(mapping: dict, allowed, path: str, source: str, optional=()) -> None:
    allowed = list(allowed)
    for key in mapping:
        if key not in allowed:
            hint = difflib.get_close_matches(str(key), allowed, n=1)
            did_you_mean = f' (did you mean "{hint[0]}"?)' if hint else f" (expected one of: {', '.join(allowed)})"
            raise ConfigError(f"{source}: {_join(path, key)}: unknown key{did_you_mean}")
    for key in allowed:
        if key not in mapping and key not in optional:
            raise ConfigError(f"{source}: {_join(path, key)}: missing key")


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _build(cls: type, value: Any, path: str, source: str):
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: {path}: expected a mapping, got {_show(value)}")
    fields = dataclasses.fields(cls)
    hints = typing.get_type_hints(cls)
    optional = [f.name for f in fields if f.metadata.get("optional_key")]
    _check_keys(value, [f.name for f in fields], path, source, optional)
    kwargs: dict[str, Any] = {}
    for f in fields:
        if f.name not in value:  # an optional key (a model's settings) left out
            kwargs[f.name] = None
            continue
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

    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
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
            if isinstance(item_type, type) and dataclasses.is_dataclass(item_type):
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


def dataset_section(value: Any, stage: str, name: str, built: dict[str, dict[str, Any]], source: str):
    """Dataset `name`'s section of `stage` built from the mapping `value` in place of its section in
    `built` (a file's sections, as `sections` returned them), checked as `sections` checks it: its
    own keys, then `_check_across`'s checks of dataset `name` with its other sections from `built`.
    Its class is the one its preprocess section in `built` says (a value drawn for a train key)."""
    dataset = datasets.of(built["preprocess"][name], name)
    section = _build(dataset.classes()[stage], value, f"{stage}.{name}", source)
    _check_across({s: {name: section if s == stage else built[s][name]} for s in built}, source)
    return section
