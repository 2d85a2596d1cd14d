"""The params file's `add` section: for each template of a kind of dataset (`add.<template>`:
pipeline.kinds.TEMPLATES), the sections a new dataset of that kind starts with, one per stage
section of the file, as they would stand under `<stage>.<name>` (`pipeline add` copies them).

Defaults live in the params file only: these are the defaults of a dataset not yet declared.
Each template is checked when the file is read, as a dataset of its kind under a placeholder
name, so that a bad default fails before anything copies it, naming `add.<kind>.<stage>.<key>`;
`pipeline add` fills what only the new dataset can say: the URL and sha256 of its one file,
and the study's name when the template leaves it empty. Nothing else reads the section: it
declares no dataset."""

from __future__ import annotations

import copy
import difflib
import json
import re
from typing import Any, Optional

from pipeline.config.loading import build, datasets, search_space
from pipeline.errors import ConfigError
from pipeline.kinds.known import TEMPLATES

SECTION = "add"
# the templates a params file may hold, each of a kind: pipeline.kinds.TEMPLATES (each kind names its own)
# the name a template is built under: a dataset name nothing else in a message says
PLACEHOLDER = "NAME"
# what stands for the URL --url gives, to build a template's download section
PLACEHOLDER_URL = "https://example.invalid/NAME"


def stages_of(raw: Any) -> Any:
    """The params mapping `raw` without its `add` section: the datasets' sections alone, as
    `build.sections` takes them (a shallow copy; `raw` itself when it is no mapping)."""
    if not isinstance(raw, dict):
        return raw
    return {key: value for key, value in raw.items() if key != SECTION}


def check(raw: Any, source: str) -> None:
    """The `add` section of the params mapping `raw`, when it has one: a mapping of kinds, each
    template holding every stage section of one dataset of that kind, valid as one (its
    search space too); ConfigError naming `add.<kind>...` otherwise."""
    if not isinstance(raw, dict) or SECTION not in raw:
        return
    section = raw[SECTION]
    if not isinstance(section, dict) or not section:
        raise ConfigError(
            f"{source}: {SECTION}: expected a mapping of templates ({', '.join(TEMPLATES)}) to a new dataset's "
            f"sections, got {_show(section)}"
        )
    for name, template in section.items():
        _check_key(name, list(TEMPLATES), SECTION, source)
        _check_template(name, template, source)


def kinds(raw: dict) -> list[str]:
    """The kinds the validated params mapping `raw` has a template of, in the file's order."""
    return list(raw.get(SECTION) or {})


def _check_key(key: Any, allowed: list[str], where: str, source: str) -> None:
    if key not in allowed:
        hint = difflib.get_close_matches(str(key), allowed, n=1)
        did_you_mean = f' (did you mean "{hint[0]}"?)' if hint else f" (expected one of: {', '.join(allowed)})"
        raise ConfigError(f"{source}: {where}.{key}: unknown key{did_you_mean}")


def _check_template(name: str, template: Any, source: str) -> None:
    where, kind = f"{SECTION}.{name}", TEMPLATES[name]
    if not isinstance(template, dict):
        raise ConfigError(f"{source}: {where}: expected a mapping of stage sections, got {_show(template)}")
    for stage in template:
        _check_key(stage, list(datasets.STAGE_SECTIONS), where, source)
    for stage in datasets.STAGE_SECTIONS:
        if stage not in template:
            raise ConfigError(f"{source}: {where}.{stage}: missing key")
    preprocess = template["preprocess"]
    if isinstance(preprocess, dict) and preprocess.get("kind") != kind:
        raise ConfigError(
            f"{source}: {where}.preprocess.kind: expected {kind!r} (the template's kind), got "
            f"{_show(preprocess.get('kind'))}"
        )
    _check_placeholders(template, where, source)
    raw = {stage: {PLACEHOLDER: section} for stage, section in fill(template, PLACEHOLDER, PLACEHOLDER_URL).items()}
    try:
        built = build.sections(raw, source)
        search_space.check(raw, built, PLACEHOLDER, source)
    except ConfigError as exc:
        stages = "|".join(datasets.STAGE_SECTIONS)
        raise ConfigError(re.sub(rf"\b({stages})\.{PLACEHOLDER}\b", rf"{where}.\1", str(exc))) from None


def _check_placeholders(template: dict, where: str, source: str) -> None:
    """The download section's files: one, whose url and sha256 are the new dataset's (empty)."""
    download = template["download"]
    files = download.get("files") if isinstance(download, dict) else None
    if not isinstance(files, list) or len(files) != 1 or not isinstance(files[0], dict):
        raise ConfigError(
            f"{source}: {where}.download.files: expected one file, whose url `pipeline add` sets (--url), "
            f"got {_show(files)}"
        )
    for key, option in (("url", "--url"), ("sha256", "--sha256")):
        if files[0].get(key) not in ("", None):
            raise ConfigError(
                f"{source}: {where}.download.files[0].{key}: expected '' or null (`pipeline add` sets it from "
                f"{option}), got {_show(files[0].get(key))}"
            )


def _show(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def fill(template: dict, name: str, url: str, sha256: Optional[str] = None) -> dict[str, Any]:
    """A copy of `template` (a kind's stage sections) made dataset `name`'s: its file's url and
    sha256 set, its study named `name` when the template leaves the study empty."""
    sections = copy.deepcopy(template)
    files = sections["download"]["files"]
    files[0]["url"], files[0]["sha256"] = url, sha256
    tune = sections["tune"]
    if isinstance(tune, dict) and tune.get("study") in ("", None):
        tune["study"] = name
    return sections
