"""What `pipeline add` chooses from a dataset before it declares it: each choice a key of the new
dataset's sections, its value and the figure it was read from (a line of `pipeline add`'s
output), or a figure it only reports (value None). Each kind's reader reads its own data
(`survey` of pipeline/data/images.py, texts.py and tabular.py, beside the code preprocess reads
it with); what every kind reports alike (the classes' spread) is here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

# the key of a choice that is not a key: which of the params file's templates the dataset starts from
TEMPLATE = "template"


@dataclass(frozen=True)
class Choice:
    """A setting chosen from the data: `key` dotted below the dataset's name in its stage
    section ("preprocess.image_size", "train.class_weight"), or `TEMPLATE`; `why`, the figure it
    was chosen from; `template`, the one template it is for (None: any). `value` None: a figure
    read and reported, nothing chosen; the template's value (or -S's) stands."""

    key: str
    value: Any
    why: str
    template: Optional[str] = None


def class_weight(counts: Mapping[str, int], samples: str) -> Choice:
    """The classes' spread, reported beside the template's `train.class_weight`, which it does not
    change (`none` in every template: accuracy counts every sample alike, and weighing each class
    by its size trades it for the small classes' recall, a trade Keras and scikit-learn leave to
    the user; docs/own-data.md: what it cost where measured); `counts`: each class's samples
    (`samples` says which)."""
    largest, smallest = max(counts.values()), min(counts.values())
    figure = f"the classes have {smallest:,} to {largest:,} {samples} ({largest / max(smallest, 1):.1f}x)"
    return Choice(
        "train.class_weight", None, f"{figure}; balanced weighs each class by its size, for the small classes"
    )


def spread(count: int, most: int) -> list[int]:
    """At most `most` places of `count`, evenly spread over them (all of them when fewer)."""
    if count <= most:
        return list(range(count))
    return [i * count // most for i in range(most)]
