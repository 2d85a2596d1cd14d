"""A study's search space (`tune.<ds>.space`): each dimension checked against `train.<ds>`
(its key is a param there, every value it can draw is one the config accepts), drawn for a
trial with Optuna's `suggest_*`, and written as the `-S` overrides that train it. No
TensorFlow and no Optuna at import: the config checks run in every stage."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from pipeline.config.loading import build
from pipeline.errors import ConfigError

# Chosen once per worker process (its devices and strategy are fixed when TensorFlow starts),
# so they cannot differ from trial to trial.
PER_WORKER = ("devices", "strategy", "cross_device_ops", "num_packs", "slurm_port_base")


def check(raw: dict, built: dict[str, dict[str, Any]], dataset: str, source: str) -> None:
    """ConfigError naming the dimension of tune.<dataset>.space (in `built`, the file's sections
    as `build.sections` returned them from `raw`) when a key is not a param of train.<dataset>,
    is set per worker, appears twice, has fields its kind does not take, or can draw a value
    that train.<dataset> would reject (checked at the range's ends and at every choice: that
    section alone built with the value, with its checks against the dataset's other sections)."""
    seen = set()
    for i, dim in enumerate(built["tune"][dataset].space):
        where = f"{source}: tune.{dataset}.space[{i}]"
        _check_key(raw["train"][dataset], dim.key, dataset, f"{where}.key")
        if dim.key in seen:
            raise ConfigError(f"{where}.key: {dim.key} is in the space twice")
        seen.add(dim.key)
        _check_fields(dim, where)
        for value in drawable_extremes(dim):
            trial = copy.deepcopy(raw["train"][dataset])
            _set(trial, dim.key, value)
            try:
                build.dataset_section(trial, "train", dataset, built, source)
            except ConfigError as exc:
                reason = str(exc).removeprefix(f"{source}: ")
                raise ConfigError(
                    f"{where}: {dim.key}={format_value(value)} can be drawn, and the config rejects it: {reason}"
                ) from None


def _check_key(train: dict, key: str, dataset: str, where: str) -> None:
    parts = key.split(".")
    if parts[0] in PER_WORKER:
        raise ConfigError(
            f"{where}: {key} is set once per worker (its devices and strategy), not per "
            f"trial: set it in train.{dataset}"
        )
    missing = build.missing_key(train, parts)
    if missing is not None:
        depth, hint = missing
        under = ".".join(["train", dataset, *parts[:depth]])
        raise ConfigError(f"{where}: {under} has no param {parts[depth]!r}{hint}")
    node = train
    for part in parts:
        node = node[part]
    if isinstance(node, dict):
        raise ConfigError(f"{where}: train.{dataset}.{key} is a section: name one of its keys ({', '.join(node)})")


def _check_fields(dim, where: str) -> None:
    if dim.kind == "choice":
        if dim.values is None or dim.low is not None or dim.high is not None:
            raise ConfigError(f"{where}: a choice takes values (a list) and no low or high")
        return
    if dim.values is not None or dim.low is None or dim.high is None:
        raise ConfigError(f"{where}: {dim.kind} takes low and high, and no values")
    if not dim.low < dim.high:
        raise ConfigError(f"{where}: expected low < high, got low {dim.low:g} and high {dim.high:g}")
    if dim.kind == "log_uniform" and dim.low <= 0:
        raise ConfigError(f"{where}: log_uniform needs low > 0, got {dim.low:g}")
    if dim.kind == "int" and not (float(dim.low).is_integer() and float(dim.high).is_integer()):
        raise ConfigError(f"{where}: int takes whole numbers, got low {dim.low:g} and high {dim.high:g}")


def drawable_extremes(dim) -> list:
    """The values that stand for all a dimension can draw: a range's two ends, every choice."""
    if dim.kind == "choice":
        return list(dim.values)
    if dim.kind == "int":
        return [int(dim.low), int(dim.high)]
    return [float(dim.low), float(dim.high)]


def _set(node: dict, key: str, value: Any) -> None:
    *parents, last = key.split(".")
    for part in parents:
        node = node[part]
    node[last] = value


# --------------------------------------------------------------------------- a trial's values


def _categories(dim) -> list:
    """A choice's values as Optuna takes them: scalars as they are, a list as its JSON text."""
    return [json.dumps(v) if isinstance(v, list) else v for v in dim.values]


def suggest(trial, space: Sequence) -> dict[str, Any]:
    """The trial's value of each dimension, by key (an enqueued trial's are fixed already)."""
    values = {}
    for dim in space:
        if dim.kind == "choice":
            picked = trial.suggest_categorical(dim.key, _categories(dim))
            values[dim.key] = (
                json.loads(picked)
                if any(isinstance(v, list) for v in dim.values) and isinstance(picked, str)
                else picked
            )
        elif dim.kind == "int":
            values[dim.key] = trial.suggest_int(dim.key, int(dim.low), int(dim.high))
        else:
            values[dim.key] = trial.suggest_float(dim.key, dim.low, dim.high, log=dim.kind == "log_uniform")
    return values


def decode(space: Sequence, params: dict) -> dict[str, Any]:
    """A finished trial's Optuna params back as the values train.<ds> takes."""
    lists = {dim.key for dim in space if dim.kind == "choice" and any(isinstance(v, list) for v in dim.values)}
    return {key: json.loads(value) if key in lists else value for key, value in params.items()}


def format_value(value: Any) -> str:
    """`value` as `-S KEY=VALUE` takes it, read back as the same YAML value by DVC and by
    `pipeline`: a float always with its point (PyYAML reads 1e-05 as a string), a list in
    brackets, a string bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = repr(value)
        mantissa, e, exponent = text.partition("e")
        if e and "." not in mantissa:
            text = f"{mantissa}.0e{exponent}"
        return text
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return str(value)


def overrides(dataset: str, values: dict[str, Any]) -> list[str]:
    """The `-S` overrides that set a trial's values: `train.reuters.learning_rate=0.002`."""
    return [f"train.{dataset}.{key}={format_value(value)}" for key, value in values.items()]


def as_json(space: Sequence) -> str:
    """The space as one canonical JSON text: what identifies a study's space."""
    return json.dumps(
        [
            {
                "key": d.key,
                "kind": d.kind,
                "low": d.low,
                "high": d.high,
                "values": list(d.values) if d.values is not None else None,
            }
            for d in space
        ],
        sort_keys=True,
    )
