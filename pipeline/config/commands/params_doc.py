"""The params file as its users read it: the form it is kept in (what `dvc exp run -S` writes,
so that an override changes one line) and what each key means, as `pipeline params` prints it
and the docs' table shows it. The keys, their types and checks are pipeline/config/keys/schema.py's."""

from __future__ import annotations

import dataclasses
import functools
import io
import textwrap
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline import fields
from pipeline.config.loading import build, datasets, loader, templates
from pipeline.errors import ConfigError
from pipeline.kinds.known import TEMPLATES


def set_in_file(path: Path | str, overrides: Sequence[str]) -> None:
    """Apply `key=value` overrides to a params file in place, checked as the stages check it
    (for tools that run the stages on a modified copy of the params)."""
    raw = loader.apply_overrides(loader.read_yaml(Path(path)), overrides, source=str(path))
    loader.validate(raw, source=str(path))
    Path(path).write_text(format_params(raw), encoding="utf-8")


# --------------------------------------------------------------------------- the file's form

PARAMS_HEADER = """\
# Every tunable value of the pipeline, and the only place defaults live; dvc.yaml lists the keys
# each stage reads. What each key means: `pipeline params` (or docs/params.md).
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
    the header comment and a blank line between top-level sections, both of which DVC keeps;
    but not after a section whose last value is in a list (tune's space, before `add`): that
    blank line, a comment after a list, DVC drops."""
    from ruamel.yaml import YAML

    writer = YAML()
    writer.default_flow_style = False
    writer.Representer = _representer()
    stream = io.StringIO()
    writer.dump(raw, stream)
    lines: list[str] = []
    sections = iter(raw.values())
    for line in stream.getvalue().splitlines():
        if lines and line[:1] not in ("", " ", "-") and not _ends_in_list(next(sections)):  # a section after the first
            lines.append("")
        lines.append(line)
    return PARAMS_HEADER + "\n" + "\n".join(lines) + "\n"


@functools.cache
def _representer() -> type:
    """ruamel.yaml's round-trip representer with `_float` for floats: a subclass, as
    add_representer changes the class it is called on for the whole process (DVC's own
    writer, in a test, included); made once, at the first file written."""
    from ruamel.yaml.representer import RoundTripRepresenter

    class Representer(RoundTripRepresenter):
        pass

    Representer.add_representer(float, _float)
    return Representer


def _float(representer, value: float):
    """A float as ruamel.yaml writes it, but a mantissa without a point given one (5e-05 as
    5.0e-05): YAML 1.1 readers (PyYAML's safe_load) read the first as a string. DVC's round trip
    keeps a value as it is written, so the file stays a fixed point of `dvc exp run -S`."""
    node = representer.represent_float(value)
    mantissa, e, exponent = node.value.partition("e")
    if e and "." not in mantissa:
        node.value = f"{mantissa}.0e{exponent}"
    return node


def _ends_in_list(value: Any) -> bool:
    """Whether the last line YAML writes of `value` is in a list (an item, or a key of one)."""
    while isinstance(value, dict) and value:
        value = list(value.values())[-1]
    return isinstance(value, list)


def rewrite_file(path: Path, raw: dict) -> str:
    """`pipeline params --rewrite`: put the validated params `raw` of file `path` back in the
    form `dvc exp run -S` writes (when it is not already); the line that says what was done."""
    text = format_params(raw)
    if path.read_text(encoding="utf-8") == text:
        return f"{path}: already in the form `dvc exp run -S` writes"
    path.write_text(text, encoding="utf-8")
    return (
        f"{path}: rewritten in the form `dvc exp run -S` writes (comments other than the header "
        "dropped: the meanings are in `pipeline params`)"
    )


def command(path: Path, dataset: str | None, *, markdown: bool, rewrite: bool, width: int) -> str:
    """What `pipeline params` prints: the file validated, then put back in DVC's form
    (`rewrite`), or its keys as docs/params.md's table (`markdown`) or as text `width` columns
    wide: every dataset's, then the `add` section's templates (DATASET's alone, when given)."""
    raw = loader.read_params(path)
    built = loader.validate(raw, source=str(path))
    if rewrite:
        return rewrite_file(path, raw) + "\n"
    if dataset is not None and dataset not in built["train"]:
        raise ConfigError(f"unknown dataset {dataset!r}: {path} declares {', '.join(built['train'])}")
    docs = describe(raw, [dataset]) if dataset else describe(raw, list(built["train"]), templates.kinds(raw))
    return format_markdown(docs) if markdown else format_text(docs, width=width)


# --------------------------------------------------------------------------- key documentation


@dataclass(frozen=True)
class KeyDoc:
    """One key of a params file: its dotted path (as `-S` takes it), value and meaning."""

    key: str
    template: str  # the key with `<ds>` for the dataset and `[]` for list positions
    value: Any
    meaning: str  # empty for the second and later items of a list
    has_value: bool = True  # False for a mapping (its keys follow)

    @property
    def column(self) -> str:
        """Whose key it is: a dataset's name, or `add.<kind>` for a template's key."""
        parts = self.key.split(".")
        return ".".join(parts[:2]) if parts[0] == templates.SECTION else parts[1]

    @property
    def section(self) -> str:
        """The section it is in: `train.reuters`, `add.image_folders.train`."""
        parts = self.key.split(".")
        return ".".join(parts[:3] if parts[0] == templates.SECTION else parts[:2])


def meaning(cls: type, name: str) -> str:
    """What field `name` of config class `cls` means, with the values it takes."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    expect = f.metadata.get("expect") or build.one_of(build.unwrap_optional(typing.get_type_hints(cls)[name]))
    text = f.metadata["help"]
    return text if expect == "a mapping" else f"{text} Value: {expect}."


def describe(raw: dict, names: Sequence[str], kinds: Sequence[str] = ()) -> list[KeyDoc]:
    """Every key of a validated params file, in the file's order, for the given datasets, then
    for the templates of the given kinds (`add.<kind>.<stage>.<key>`)."""
    found = datasets.declared(raw, "params")
    docs: list[KeyDoc] = []
    for stage in (stage for stage in raw if stage in datasets.STAGE_SECTIONS):
        for ds, values in raw[stage].items():
            if ds in names:
                _describe(found[ds].classes()[stage], values, f"{stage}.{ds}", f"{stage}.<ds>", docs, True)
    for kind in kinds:
        template = raw[templates.SECTION][kind]
        reader = template["preprocess"]["reader"]
        classes = datasets.Dataset(templates.PLACEHOLDER, TEMPLATES[kind], reader).classes()
        for stage, values in template.items():
            _describe(classes[stage], values, f"{templates.SECTION}.{kind}.{stage}", f"{stage}.<ds>", docs, True)
    return docs


# What one item of a list of mappings is, by the list's key (`pipeline params`: "2 files").
ITEM_NOUNS = {"files": "file", "space": "dimension"}


def _describe(cls: type, values: dict, prefix: str, template: str, docs: list, first: bool) -> None:
    hints = typing.get_type_hints(cls)
    for name, value in values.items():
        tp = build.unwrap_optional(hints[name])
        key, tmpl = f"{prefix}.{name}", f"{template}.{name}"
        text = meaning(cls, name) if first else ""
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            docs.append(KeyDoc(key, tmpl, None, text, has_value=False))
            _describe(tp, value, key, tmpl, docs, first)
        elif typing.get_origin(tp) is tuple and dataclasses.is_dataclass(typing.get_args(tp)[0]):
            noun = ITEM_NOUNS.get(name, "item")
            docs.append(KeyDoc(key, tmpl, f"{len(value)} {noun}{'s' if len(value) != 1 else ''}", text))
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
    out: list[str] = []
    section = None
    for doc in docs:
        if section is not None and doc.section != section:
            out.append("")
        section = doc.section
        out.append(f"{doc.key}: {show_value(doc.value)}" if doc.has_value else f"{doc.key}:")
        if doc.meaning:
            out.extend(
                textwrap.wrap(
                    doc.meaning,
                    width=max(width, 40),
                    initial_indent="    ",
                    subsequent_indent="    ",
                    break_on_hyphens=False,
                )
            )
    return "\n".join(out) + "\n"


def format_markdown(docs: Sequence[KeyDoc]) -> str:
    """docs/params.md's table: a row per key (with `<ds>` for the dataset), a column per dataset
    (and per template, `add.<kind>`); a meaning that differs between them names whose it is."""
    rows: dict[str, dict] = {}
    names: list[str] = []
    for doc in docs:
        ds = doc.column
        if ds not in names:
            names.append(ds)
        row = rows.setdefault(doc.template, {"values": {}, "meanings": {}, "has_value": doc.has_value})
        if doc.has_value:
            row["values"].setdefault(ds, []).append(_markdown_value(doc.value))
        if doc.meaning:
            row["meanings"][ds] = doc.meaning
    lines = [
        "| Key | " + " | ".join(names) + " | Meaning |",
        "|---|" + "---|" * len(names) + "---|",
    ]
    # a template's key that no dataset has (a reader's own) among its stage's keys, not last
    stages = list(dict.fromkeys(template.split(".")[0] for template in rows))
    for template, row in sorted(rows.items(), key=lambda item: stages.index(item[0].split(".")[0])):
        cells = []
        for ds in names:
            values = row["values"].get(ds)
            cells.append("<br>".join(values) if values else ("" if not row["has_value"] else "—"))
        whose: dict[str, list[str]] = {}
        for ds, meant in row["meanings"].items():
            whose.setdefault(meant, []).append(ds)
        text = next(iter(whose)) if len(whose) == 1 else " ".join(f"{', '.join(d)}: {t}" for t, d in whose.items())
        lines.append(f"| `{template}` | " + " | ".join(cells) + " | " + text.replace("|", "\\|") + " |")
    return "\n".join(lines) + "\n"


def _markdown_value(value: Any) -> str:
    if isinstance(value, str) and fields.is_url(value):
        return f"[{value.rstrip('/').rsplit('/', 1)[-1]}]({value})"
    if isinstance(value, str) and fields.is_sha256(value):
        return f"`{value[:12]}…`"
    return f"`{show_value(value)}`"
