"""params.yaml -> typed, frozen, validated config objects.

Defaults live in params.yaml only: these classes have no default values, so a key missing
from the file is an error rather than a silent fallback. Loading never imports TensorFlow,
so a config error stops a stage in well under a second and before anything is written.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from pipeline.config.keys.schema import DatasetParams
from pipeline.config.loading import build, datasets, search_space, templates
from pipeline.errors import ConfigError

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
            raise yaml.MarkedYAMLError(problem=f"duplicate key {key!r}", problem_mark=mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


ParamsLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
# YAML 1.2's floats too: PyYAML resolves YAML 1.1's, in which a number with an exponent and no
# point is a string, and that is how `dvc exp run -S` writes small values (0.00004 as 4e-05,
# through ruamel.yaml, which reads it back as a float, as DVC does).
ParamsLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
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
        raise ConfigError(
            f"{path}:{line}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})"
        ) from None
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
        line = text_line(text.encode("utf-8"), len(text[: exc.position].encode("utf-8")))
        raise ConfigError(f"{path}:{line}: invalid YAML: {exc.reason} {exc.character!r}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None


def load_params(path: Path | str, dataset: str, overrides: Sequence[str] = ()) -> DatasetParams:
    """Load and validate the params file's datasets, then return one dataset's sections.

    Every dataset is checked so that a typo anywhere is caught by the first stage that runs;
    the `add` templates, which no stage reads, are left to the commands that do (`validate`).
    `overrides` are `key=value` assignments applied first, as `dvc exp run -S` applies them.
    """
    path = Path(path)
    return params_of(apply_overrides(read_params(path), overrides, source=str(path)), dataset, str(path))


def read_params(path: Path) -> Any:
    """The params file as read, once its datasets are the ones the dvc.yaml beside it (when
    there is one) runs: a name declared in one and not the other is a ConfigError naming both."""
    raw = read_yaml(path)
    pipeline_file = path.parent / "dvc.yaml"
    stages = raw.get("preprocess") if isinstance(raw, dict) else None
    if isinstance(stages, dict) and pipeline_file.is_file():
        datasets.check_foreach(list(stages), read_yaml(pipeline_file), str(path), str(pipeline_file))
    return raw


def names(path: Path | str) -> list[str]:
    """The datasets the params file declares, every key of it validated."""
    return list(validate(read_params(Path(path)), str(path))["train"])


def params_of(raw: Any, dataset: str, source: str) -> DatasetParams:
    """One dataset's sections of the params mapping `raw` (a file's, as read), every dataset's
    keys validated, the search spaces too (not the `add` templates, which no stage reads): what
    a process is handed instead of a file to read again."""
    built = validate(raw, source, templates_too=False)
    if dataset not in built["train"]:
        raise ConfigError(f"unknown dataset {dataset!r}: {source} declares {', '.join(built['train'])}")
    return _bundle(built, dataset, raw)


def overridden(params: DatasetParams, overrides: Sequence[str], source: str) -> DatasetParams:
    """`params` with the `key=value` overrides applied to a copy of its mapping (a trial's drawn
    values): the sections built and checked again, not the search spaces, which `params` passed."""
    raw = apply_overrides(copy.deepcopy(params.raw), overrides, source)
    return _bundle(build.sections(templates.stages_of(raw), source), params.dataset, raw)


def _bundle(built: dict[str, dict[str, Any]], dataset: str, raw: Any) -> DatasetParams:
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
        missing = build.missing_key(raw, parts)
        if missing is not None:
            depth, hint = missing
            where = ".".join(parts[:depth]) or "the top level"
            raise ConfigError(f"-S {item}: {source} has no key {parts[depth]!r} under {where}{hint}")
        for part in parts[:-1]:
            node = node[part]
        if not sep:
            raise ConfigError(f"-S {item}: expected key=value, e.g. train.reuters.epochs=3")
        try:
            node[parts[-1]] = yaml.load(text, Loader=ParamsLoader)  # 1e-4 a number, as DVC's -S reads it
        except yaml.YAMLError as exc:
            raise ConfigError(f"-S {item}: the value is not valid YAML: {exc}") from None
    return raw


def validate(raw: Any, source: str = "params.yaml", *, templates_too: bool = True) -> dict[str, dict[str, Any]]:
    """Every dataset's sections built from `raw` (`build.sections`, once), and every value each
    tune.<ds>.space can draw checked against train.<ds> (that section alone built again with it);
    then, `templates_too` (`pipeline add`, `pipeline params`, the datasets' listing), the `add`
    section's templates, each as a dataset of its kind (`templates.check`), which the result
    leaves out: they declare no dataset. ConfigError naming the first bad key."""
    stages = templates.stages_of(raw)
    built = build.sections(stages, source)
    for ds in built["tune"]:
        search_space.check(stages, built, ds, source)
    if templates_too:
        templates.check(raw, source)
    return built
