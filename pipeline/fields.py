"""How a key of params.yaml is declared on its section's dataclass: what it means, what a value
must be and its check (pipeline/config/loading/build.py applies them; params_doc.py shows them). No
default values: defaults live in params.yaml only."""

from __future__ import annotations

from dataclasses import field
from typing import Optional


def spec(expect: Optional[str] = None, check=None, *, help: str, optional_key: bool = False):
    """Field metadata: what the key means (`help`, shown by `pipeline params` and in docs/params.md's
    table), what a value must be (for messages) and an optional range check. A Literal field
    needs no `expect`: its message lists the type's own values. Every field has a help text:
    params.yaml carries no comments (DVC's `-S` rewrite would drop most of them), so this is
    where each key is documented. An `optional_key` may be left out of its section (then it is
    None): a model's settings, needed only by a section that trains that model."""
    return field(metadata={"expect": expect, "check": check, "help": help, "optional_key": optional_key})


def positive_int(help: str):
    return spec("a positive integer", lambda v: v > 0, help=help)


def non_negative_int(help: str):
    return spec("a non-negative integer", lambda v: v >= 0, help=help)


def fraction(help: str, low_open: bool = False):
    if low_open:
        return spec("a number in (0, 1)", lambda v: 0.0 < v < 1.0, help=help)
    return spec("a number in [0, 1)", lambda v: 0.0 <= v < 1.0, help=help)


def is_sha256(v: str) -> bool:
    return len(v) == 64 and all(c in "0123456789abcdef" for c in v.lower())


def is_url(v: str) -> bool:
    return v.split("://", 1)[0] in ("http", "https", "file") and "://" in v
