"""`pipeline add` and `pipeline remove`: a dataset declared in the params file and the dvc.yaml
beside it, or taken out of both.

`add` copies the params file's template of the dataset's kind (`add.<kind>`, pipeline/config/
templates.py) under the new name in every stage section, after the datasets there, sets its
file's URL and sha256 and the `-S` overrides given, and checks the whole file as every command
does; it then lists the name in each `foreach` of dvc.yaml and its report in `metrics` and
`plots`. `remove` takes the same things out. Both write the params file in the form `dvc exp
run -S` writes it (`params_doc.format_params`) and edit dvc.yaml through ruamel.yaml's round
trip, which keeps its comments and flow lists; either both files change or neither does: they
are written only once everything is checked, each to a temporary file renamed over it. The
read-check-write of both files runs under a lock (`.<params file>.lock` beside them), so that
commands run at once (a script declaring several datasets, two terminals) apply their changes
one after the other, each to what the one before wrote."""

from __future__ import annotations

import copy
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from pipeline import fields
from pipeline import io as files
from pipeline.config.commands import params_doc
from pipeline.config.loading import datasets, loader, templates
from pipeline.data import fetch, survey
from pipeline.errors import ConfigError
from pipeline.kinds.image_folders import PHOTOS
from pipeline.kinds.known import KINDS, TEMPLATES

# What dvc.yaml shows of each dataset besides its stages (as it shows Reuters' and MNIST's)
MEASUREMENTS = "reports/{name}/measurements.json"
HISTORY = "reports/{name}/history.csv"
PLOTS = {"accuracy": ["accuracy", "val_accuracy"], "loss": ["loss", "val_loss"]}
# how long `pipeline add` or `remove` waits for another one's edit of the same files
LOCK_SECONDS = 60.0


def add(
    params_path: Path, name: str, kind: str, url: str, sha256: str | None, overrides: Sequence[str], photos=False
) -> str:
    """Declare dataset `name` of `kind` (see the module's docstring), from the template of
    photos when `photos` or when its pictures are photos; the lines that say what was read from
    the data, what was chosen from it, and what was added."""
    source = str(params_path)
    if photos and TEMPLATES.get(PHOTOS) != kind:
        raise ConfigError(f"--photos: a template of {TEMPLATES[PHOTOS]}, and --kind is {kind}")
    with _locked(params_path):  # not between another command's writes of the two files
        raw = _read(params_path)
    if datasets.name_problem(name) is not None:
        raise ConfigError(
            f"NAME {name!r}: expected a dataset name of {datasets.NAME_RULE}: {datasets.name_problem(name)}"
        )
    _check_new(raw, name, source)
    if not fields.is_url(url):
        raise ConfigError(f"--url {url}: expected an http://, https:// or file:// URL")
    if sha256 is not None and not fields.is_sha256(sha256):
        raise ConfigError(f"--sha256 {sha256}: expected a 64-digit hex sha256")
    for item in overrides:
        parts = item.partition("=")[0].strip().split(".")
        if len(parts) < 3 or parts[0] not in datasets.STAGE_SECTIONS or parts[1] != name:
            raise ConfigError(f"-S {item}: `pipeline add` sets the new dataset's keys: <stage>.{name}.<key>=<value>")
    template_name = PHOTOS if photos else KINDS[kind].templates[0]
    sections = _filled(raw, template_name, kind, name, url, sha256, source)
    params = loader.params_of(_declared(raw, name, sections, overrides, source), name, source)
    with fetch.at_hand(params.download) as folder:
        choices = datasets.of(params.preprocess, name).survey(folder, params.preprocess)
    lines = [f"read {url}:"]
    for choice in choices:
        if choice.key == survey.TEMPLATE:
            if not photos and choice.value != template_name:
                template_name = choice.value
                sections = _filled(raw, template_name, kind, name, url, sha256, source)
            lines.append(f"  template: add.{template_name} ({choice.why})")
    chosen = [c for c in choices if c.key != survey.TEMPLATE and c.template in (None, template_name)]
    with _locked(params_path):  # read again: what another `pipeline add` or `remove` wrote meanwhile
        raw = _read(params_path)
        _check_new(raw, name, source)
        sections = _filled(raw, template_name, kind, name, url, sha256, source)
        lines += _apply(chosen, sections, name, {item.partition("=")[0].strip() for item in overrides})
        raw = _declared(raw, name, sections, overrides, source)
        loader.validate(raw, source)
        _write(params_path, raw, lambda pipeline: _list(pipeline, name))
    described = kind if template_name == kind else f"{kind}, {template_name}"
    lines.append(f"added {name} ({described}) to {params_path} and {_dvc_yaml(params_path)}: dvc repro evaluate@{name}")
    return "\n".join(lines)


def _check_new(raw: dict, name: str, source: str) -> None:
    for stage in datasets.STAGE_SECTIONS:
        if name in raw[stage]:
            raise ConfigError(f"{source}: {stage}.{name}: already declared (`pipeline remove {name}` takes it out)")


def _locked(params_path: Path):
    """The lock `pipeline add` and `remove` hold over their read-check-write of the params file
    and the dvc.yaml beside it (`.<params file>.lock` beside them), so that commands run at
    once apply their changes one after the other, none lost: a command waits its turn,
    `LOCK_SECONDS` at most."""
    lock = params_path.with_name(f".{params_path.name}.lock")
    return files.locked(lock, LOCK_SECONDS, held_by="another `pipeline add` or `pipeline remove`")


def _filled(raw: dict, template_name: str, kind: str, name: str, url: str, sha256: str | None, source: str) -> dict:
    """The params file's template `template_name`, made dataset `name`'s (`templates.fill`)."""
    template = (raw.get(templates.SECTION) or {}).get(template_name)
    if template is None:
        raise ConfigError(
            f"{source}: {templates.SECTION}.{template_name}: missing: the sections a new {kind} dataset starts "
            "with (docs/own-data.md)"
        )
    return templates.fill(template, name, url, sha256)


def _declared(raw: dict, name: str, sections: dict, overrides: Sequence[str], source: str) -> dict:
    """A copy of the params mapping `raw` with dataset `name`'s `sections`, then the -S
    `overrides`, applied."""
    declared = copy.deepcopy(raw)
    for stage, section in sections.items():
        declared[stage][name] = copy.deepcopy(section)
    return loader.apply_overrides(declared, overrides, source)


def _apply(choices: list, sections: dict, name: str, set_by_s: set[str]) -> list[str]:
    """Each choice (`pipeline.data.survey.Choice`) set in dataset `name`'s `sections` but where
    a -S key (`set_by_s`) sets it; a line for each, with the figure it was chosen from. A choice
    of no value only reports its figure beside the template's value, which stands."""
    lines = []
    for choice in choices:
        stage, _, key = choice.key.partition(".")
        where = f"{stage}.{name}.{key}"
        *path, last = key.split(".")
        section = sections[stage]
        for part in path:
            section = section[part]
        if where in set_by_s:
            unused = "" if choice.value is None else f", not {_shown(choice.value)}"
            lines.append(f"  {where}: as -S sets it{unused} ({choice.why})")
        elif choice.value is None:  # a figure only: the template's value stands
            lines.append(f"  {where}: {_shown(section[last])}, the template's ({choice.why})")
        else:
            section[last] = choice.value
            lines.append(f"  {where}: {_shown(choice.value)} ({choice.why})")
    return lines


def _shown(value) -> str:
    """A setting's value for a line: a list in brackets, None as null."""
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return "null" if value is None else str(value)


def remove(params_path: Path, name: str) -> str:
    """Take dataset `name` out of the params file and dvc.yaml; the lines that say so and what
    was left alone."""
    with _locked(params_path):
        return _remove(params_path, name)


def _remove(params_path: Path, name: str) -> str:
    source = str(params_path)
    raw = _read(params_path)
    names = list(raw["download"])
    if name not in names:
        raise ConfigError(f"{source}: no dataset {name!r} to remove: it declares {', '.join(names)}")
    if names == [name]:
        raise ConfigError(f"{source}: {name} is its only dataset: a params file declares one at least")
    for stage in datasets.STAGE_SECTIONS:
        del raw[stage][name]
    loader.validate(raw, source)
    _write(params_path, raw, lambda pipeline: _unlist(pipeline, name))
    return (
        f"removed {name} from {params_path} and {_dvc_yaml(params_path)}\n"
        f"left alone: data/raw/{name}, data/prepared/{name}, models/{name}, reports/{name}, dvc.lock's "
        f"entries for its stages, and its MLflow experiment and registered model {name}"
    )


def _dvc_yaml(params_path: Path) -> Path:
    return params_path.parent / "dvc.yaml"


def _read(params_path: Path) -> Any:
    """The params file as read and checked whole (with the dvc.yaml beside it, which must be there)."""
    if not _dvc_yaml(params_path).is_file():
        raise ConfigError(
            f"{_dvc_yaml(params_path)}: file not found: a dataset is declared in the params file and the "
            "dvc.yaml beside it"
        )
    raw = loader.read_params(params_path)
    loader.validate(raw, str(params_path))
    return raw


def _write(params_path: Path, raw: dict, edit) -> None:
    """Both files written, or neither: the params file holding `raw`, and dvc.yaml as `edit`
    (a function of its round-trip document) leaves it, once what it lists is checked."""
    from ruamel.yaml import YAML  # ruamel: only `pipeline add` and `remove` edit dvc.yaml

    path = _dvc_yaml(params_path)
    loader.read_yaml(path)  # a YAML error named as every command names it
    editor = YAML()
    editor.indent(mapping=2, sequence=4, offset=2)
    editor.width = 4096  # long lines stay as they are
    editor.preserve_quotes = True
    document = editor.load(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict) or not isinstance(document.get("stages"), dict):
        raise ConfigError(f"{path}: expected a mapping with the stages")
    edit(document)
    text = io.StringIO()
    editor.dump(document, text)
    datasets.check_foreach(list(raw["download"]), yaml.safe_load(text.getvalue()), str(params_path), str(path))
    with files.atomic_outputs(params_path, path) as (params_tmp, pipeline_tmp):
        params_tmp.write_text(params_doc.format_params(raw), encoding="utf-8")
        pipeline_tmp.write_text(text.getvalue(), encoding="utf-8")


def _entries(document: Any, key: str) -> Any:
    """dvc.yaml's top-level list `key` (`metrics`, `plots`), made empty when it has none."""
    from ruamel.yaml.comments import CommentedSeq  # ruamel: as in _write

    if document.get(key) is None:
        document[key] = CommentedSeq()
    if not isinstance(document[key], list):
        raise ConfigError(f"dvc.yaml: {key}: expected a list, got {type(document[key]).__name__}")
    return document[key]


def _append(seq: Any, value: Any) -> None:
    """Append to a round-trip list, the comment after its last item kept after the new last
    (a comment after a list is its last item's: the next section's heading)."""
    last = len(seq) - 1
    seq.append(value)
    if last >= 0 and last in seq.ca.items:
        seq.ca.items[last + 1] = seq.ca.items.pop(last)


def _delete(seq: Any, index: int) -> None:
    """Delete a round-trip list's item, the comment after the last item kept after the new last."""
    after = seq.ca.items.pop(index) if index == len(seq) - 1 and index in seq.ca.items else None
    del seq[index]
    if after is not None and seq:
        seq.ca.items[len(seq) - 1] = after


def _list(document: Any, name: str) -> None:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq  # ruamel: as in _write

    for spec in document["stages"].values():
        if isinstance(spec, dict) and isinstance(spec.get("foreach"), list) and name not in spec["foreach"]:
            _append(spec["foreach"], name)
    metrics = _entries(document, "metrics")
    if MEASUREMENTS.format(name=name) not in metrics:
        _append(metrics, MEASUREMENTS.format(name=name))
    plots = _entries(document, "plots")
    if not any(_shows(plot, name) for plot in plots):
        for title, columns in PLOTS.items():
            y = CommentedSeq(columns)
            y.fa.set_flow_style()
            spec = CommentedMap(x="epoch", y=CommentedMap({HISTORY.format(name=name): y}))
            _append(plots, CommentedMap({f"{name} {title}": spec}))


def _unlist(document: Any, name: str) -> None:
    for spec in document["stages"].values():
        if isinstance(spec, dict) and isinstance(spec.get("foreach"), list) and name in spec["foreach"]:
            _delete(spec["foreach"], spec["foreach"].index(name))
    for key in ("metrics", "plots"):
        entries = document.get(key)
        for index in reversed(range(len(entries) if isinstance(entries, list) else 0)):
            if _shows(entries[index], name):
                _delete(entries, index)


def _shows(entry: Any, name: str) -> bool:
    """Whether a metrics or plots entry of dvc.yaml shows a file of reports/<name>/."""
    prefix = f"reports/{name}/"
    if isinstance(entry, str):
        return entry.startswith(prefix)
    if not isinstance(entry, dict):
        return False
    for key, spec in entry.items():
        ys = spec.get("y") if isinstance(spec, dict) else None
        if str(key).startswith(prefix) or (isinstance(ys, dict) and any(str(y).startswith(prefix) for y in ys)):
            return True
    return False
