"""What `pipeline add` chooses from a dataset before it declares it: each choice a key of the new
dataset's sections, its value and the figure it was read from (a line of `pipeline add`'s
output). Each kind's reader reads its own data (`survey` of pipeline/data/images.py and
pipeline/data/texts.py, beside the code preprocess reads it with); the rules both kinds share
are here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

# pictures whose classes are this much apart in size (the largest over the smallest) are weighed,
# class_weight balanced: measured, weighing gave a small class's pictures what the network otherwise
# hardly ever predicted, and cost a table's and the text template's accuracy (docs/own-data.md)
UNBALANCED = 10.0
# the key of a choice that is not a key: which of the params file's templates the dataset starts from
TEMPLATE = "template"


@dataclass(frozen=True)
class Choice:
    """A setting chosen from the data: `key` dotted below the dataset's name in its stage
    section ("preprocess.image_size", "train.class_weight"), or `TEMPLATE`; `why`, the figure it
    was chosen from; `template`, the one template it is for (None: any)."""

    key: str
    value: Any
    why: str
    template: Optional[str] = None


def class_weight(counts: Mapping[str, int], samples: str, weigh_from: Optional[float]) -> Choice:
    """balanced where the largest class has `weigh_from` times the samples of the smallest, else
    none; `counts`: each class's samples (`samples` says which). `weigh_from` None: none whatever
    the spread, which the line still says (weighing trades accuracy, which counts every sample
    alike, for the small classes' recall)."""
    largest, smallest = max(counts.values()), min(counts.values())
    ratio = largest / max(smallest, 1)
    figure = f"the classes have {smallest:,} to {largest:,} {samples} ({ratio:.1f}x)"
    if weigh_from is None:
        why = "weighed alike, for accuracy; balanced would trade it for the small classes' recall"
        return Choice("train.class_weight", "none", f"{figure}: {why}")
    if ratio >= weigh_from:
        return Choice("train.class_weight", "balanced", f"{figure}: each weighed by its size")
    return Choice("train.class_weight", "none", f"{figure}: balanced enough to weigh alike")


def spread(count: int, most: int) -> list[int]:
    """At most `most` places of `count`, evenly spread over them (all of them when fewer)."""
    if count <= most:
        return list(range(count))
    return [i * count // most for i in range(most)]
