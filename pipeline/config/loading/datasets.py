"""The datasets: whatever params.yaml declares, each a name (its section in every stage,
dvc.yaml's foreach, MLflow's experiment and registered model) with a kind (what its samples
are: one of `pipeline.kinds`) and a reader (how its download folder is read), both keys of its
preprocess section. The kind and reader say which classes of the schema its preprocess and
train sections are and which module of `pipeline.data` prepares it; nothing else differs
between datasets, and no code tests a dataset's name.

A name declared in one place and not another (a stage's section, or a foreach of dvc.yaml
beside the params file) is a ConfigError naming both places. So is a name that one of the things
that carry it would refuse or misread (`NAME_RULE`, `name_problem`), before any stage work."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Optional

import yaml

from pipeline.config.keys import schema, training
from pipeline.errors import ConfigError
from pipeline.kinds.known import KINDS

if TYPE_CHECKING:
    from pipeline.kinds.kind import Kind
    from pipeline.kinds.known import PreprocessConfig

STAGE_SECTIONS = ("download", "preprocess", "train", "evaluate", "serve", "promote", "tune")
# the sections alike for every dataset
COMMON = {
    "download": schema.DownloadConfig,
    "evaluate": schema.EvaluateConfig,
    "serve": schema.ServeConfig,
    "promote": schema.PromoteConfig,
    "tune": schema.TuneConfig,
}


# A dataset's name is a `dvc exp run -S train.<name>.epochs=...` key (Hydra's override grammar:
# a dotted key's parts are ASCII letters, digits, '_', '-' and '$', not starting with '-' or a
# digit), the key of dvc.yaml's foreach stages `evaluate@<name>` (DVC's stage names refuse every
# punctuation character but '_' and '-': dvc.stage.utils.is_valid_name), the folders and files
# data/raw/<name>, models/<name>, reports/<name> (one portable path component), MLflow's
# experiment and registered model `<name>` (no '/', ':' or '%'), its param keys
# `train.<name>.epochs` and tag keys `dvc.data.data/prepared/<name>` (no '$'), and a YAML key
# that PyYAML reads back as the same string. What all of them take:
NAME_RULE = "1 to 64 ASCII letters, digits, '_' or '-', starting with a letter or '_'"
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
# Windows' device names, in any case, are no file names there (pathlib.PureWindowsPath.is_reserved)
DEVICE_NAMES = {"CON", "PRN", "AUX", "NUL", *(f"{d}{i}" for d in ("COM", "LPT") for i in range(1, 10))}


def name_problem(name: Any) -> Optional[str]:
    """Why `name` cannot be a dataset's name (`NAME_RULE`), or None."""
    if not isinstance(name, str):
        return f"YAML reads it as a {type(name).__name__}, not a name: rename it"
    if not name:
        return "it is empty"
    if len(name) > 64:
        return f"it has {len(name)} characters"
    if NAME.fullmatch(name) is None:
        if not re.match(r"[A-Za-z_]", name):
            return f"it starts with {name[0]!r}"
        bad = next(c for c in name if not re.fullmatch(r"[A-Za-z0-9_-]", c))
        return f"{bad!r} is not one of them"
    if name.upper() in DEVICE_NAMES:
        return "it is a Windows device name, no file name there"
    read = yaml.safe_load(f"{name}: 0")
    if read != {name: 0}:
        return f"YAML reads it unquoted as {next(iter(read))!r}"
    return None


def check_names(names: list[Any], section: str, source: str) -> None:
    """Every name of a params file's `section` is a dataset name (`name_problem`), and no two
    differ by case alone (one folder of data/raw/ on a case-insensitive file system)."""
    seen: dict[str, str] = {}
    for name in names:
        key = f"{section}.{name}" if str(name).isprintable() else f"{section}.{name!r}"
        problem = name_problem(name)
        if problem is not None:
            raise ConfigError(f"{source}: {key}: expected a dataset name of {NAME_RULE}, got {name!r}: {problem}")
        other = seen.setdefault(name.lower(), name)
        if other != name:
            raise ConfigError(
                f"{source}: {key}: expected a dataset name apart from {section}.{other} by more than case "
                "(one folder of data/raw/ on a case-insensitive file system)"
            )


@dataclass(frozen=True)
class Dataset:
    name: str
    kind: str
    reader: str

    @property
    def of_kind(self) -> Kind:
        return KINDS[self.kind]

    def classes(self) -> dict[str, type]:
        """Its class of each section of the params file."""
        return {
            **COMMON,
            "preprocess": self.of_kind.readers[self.reader].preprocess,
            "train": training.TRAIN_CONFIGS[self.kind],
        }

    def module(self) -> ModuleType:
        # imported when asked: NumPy and Pillow stay off the paths that only read the config
        return self.of_kind.reader_module(self.reader)

    def prepare(self, raw_dir: Path | str, out: Path | str, cfg: PreprocessConfig):
        """The download folder `raw_dir` -> the prepared folder `out` (its splits' shards, the
        description with the class names, and the kind's assets, as a word index), streamed;
        the description (`pipeline.data.prepared.Prepared`)."""
        return self.module().prepare(raw_dir, out, cfg, f"preprocess.{self.name}")

    def survey(self, raw_dir: Path | str, cfg: PreprocessConfig) -> list:
        """The settings `pipeline add` chooses from the dataset in `raw_dir`, read by its reader
        (`pipeline.data.survey.Choice`s); ConfigError for a reader that chooses none."""
        module = self.module()
        if not hasattr(module, "survey"):
            raise ConfigError(f"preprocess.{self.name}.reader: {self.reader} reads no dataset `pipeline add` declares")
        return module.survey(raw_dir, cfg)


def of(cfg: PreprocessConfig, name: str) -> Dataset:
    """The dataset `name` whose preprocess section is `cfg`."""
    return Dataset(name, cfg.kind, cfg.reader)


def declared(raw: Any, source: str) -> dict[str, Dataset]:
    """Every dataset the params mapping `raw` declares, by name, in the file's order: each stage
    section (a mapping, as the builder checked) must name the same ones, and each preprocess
    section say a known kind and reader; each name must be one that everything carrying it takes
    (`check_names`)."""
    first = STAGE_SECTIONS[0]
    names = list(raw[first])
    check_names(names, first, source)
    for stage in STAGE_SECTIONS:
        section = raw[stage]
        for name in names:
            if name not in section:
                raise ConfigError(f"{source}: {first}.{name} is declared, but {stage}.{name} is not: declare both")
        for name in section:
            if name not in names:
                raise ConfigError(f"{source}: {stage}.{name} is declared, but {first}.{name} is not: declare both")
    return {name: _dataset(raw["preprocess"][name], name, source) for name in names}


def _dataset(section: Any, name: str, source: str) -> Dataset:
    where = f"{source}: preprocess.{name}"
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: expected a mapping, got {section!r}"[:200])
    kind, reader = section.get("kind"), section.get("reader")
    if not isinstance(kind, str) or kind not in KINDS:
        raise ConfigError(f"{where}.kind: expected {_one_of(list(KINDS))}, got {kind!r}")
    if not isinstance(reader, str) or reader not in KINDS[kind].readers:
        raise ConfigError(
            f"{where}.reader: expected {_one_of(list(KINDS[kind].readers))} for kind {kind!r}, got {reader!r}"
        )
    return Dataset(name, kind, reader)


def _one_of(names: list[str]) -> str:
    quoted = [repr(name) for name in names]
    return " or ".join(quoted) if len(quoted) <= 2 else f"one of {', '.join(quoted[:-1])} or {quoted[-1]}"


def check_foreach(names: list[str], dvc_yaml: Any, params_source: str, source: str) -> None:
    """Every foreach list of dvc.yaml's stages must name the datasets the params file declares."""
    stages = dvc_yaml.get("stages") if isinstance(dvc_yaml, dict) else None
    for stage, spec in (stages or {}).items():
        listed = spec.get("foreach") if isinstance(spec, dict) else None
        if not isinstance(listed, list):
            continue
        for name in listed:
            if name not in names:
                raise ConfigError(
                    f"{source}: stages.{stage}.foreach lists {name!r}, which {params_source} does not declare "
                    f"(no preprocess.{name}): declare both"
                )
        for name in names:
            if name not in listed:
                raise ConfigError(
                    f"{params_source}: {name!r} is declared, but {source}'s stages.{stage}.foreach does not list "
                    "it: declare both"
                )
