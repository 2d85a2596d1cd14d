"""What every kind of dataset declares (`Kind`, `Reader`), and the preprocess keys the kinds
share (the validation hold-out, the stratified split, the kind and reader keys themselves).

A kind names the rest of the project by module paths (strings), imported only when asked: its
reader in `pipeline.data`, its served requests' class in `pipeline.serving.forms`. So this
package sits below everything that uses it, and reading the params imports neither NumPy nor
TensorFlow."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipeline.fields import fraction, spec


@dataclass(frozen=True)
class Reader:
    """One way of reading a kind's download folder (`preprocess.<ds>.reader`)."""

    module: str  # of pipeline.data: prepare(raw_dir, out, cfg, where) -> Prepared, and survey(raw_dir, cfg)
    preprocess: type  # the class of its preprocess section


@dataclass(frozen=True)
class Kind:
    """A kind of dataset: what its samples are, from the params file to the served model."""

    name: str  # preprocess.<ds>.kind, `pipeline add --kind`
    help: str  # what its samples are, in a phrase (`pipeline add --help`)
    form: str  # what the prepared splits hold, as the prepared folder's description says it (its `input`)
    dtype: str  # of the prepared records' values and labels
    pictures: bool  # whether the input pipeline scales the samples and resizes them for the model
    readers: dict[str, Reader]
    models: str  # the key of its table of models (pipeline/config/keys/model_table.py's MODELS)
    templates: tuple[str, ...]  # the params file's add.<template> sections a new dataset of it starts from
    served: str  # "module:class" of what reads its served requests (pipeline.serving.forms)
    # the class of its own facts, which its prepared folder's description holds besides the common
    # keys (`pipeline.data.prepared.Prepared.facts`): a frozen dataclass of its module
    facts: type
    # selftest's synthetic inputs: (the preprocess section, how many, a NumPy RandomState) ->
    # (the inputs, their facts, the assets their prepared folder holds: {file name: JSON document})
    samples: Callable[[Any, int, Any], tuple[Any, Any, dict]]

    def reader_module(self, reader: str) -> Any:
        # imported when asked: NumPy and Pillow stay off the paths that only read the config
        return importlib.import_module(self.readers[reader].module)

    def served_form(self) -> Any:
        """A new instance of the class that reads its served requests (imports MLflow and NumPy)."""
        module, _, name = self.served.partition(":")
        return getattr(importlib.import_module(module), name)()


# --------------------------------------------------------------------------- the shared keys


def kind_key():
    return spec(
        "a kind of dataset (`pipeline add --help` and docs/own-data.md list them)",
        help="What the dataset's samples are: with the reader, which keys its preprocess and train sections hold.",
    )


def reader_key(help: str):
    return spec(help="How the download folder is read: " + help)


def validation_split():
    return fraction(
        help="The share of the training part held out for validation; 0: none (then early "
        "stopping cannot monitor a val_* metric, and the run and train.json have no val_* figures)."
    )


def stratify(holds_out: str, drawn_by: str, every: str):
    """The key of the readers whose splits this project draws (Keras' Reuters split is Keras')."""
    return spec(
        "true or false",
        help=f"true: {holds_out} class by class: of each class, round(share x its count) samples, at least 1 "
        "of a class of 2 or more and never all of a class's (a class of 1 stays in training), drawn by "
        f"{drawn_by}; so a rare class is in {every}, and class_weight: balanced has a weight for each. false: "
        "the share of all the samples, drawn at random (a rare class may be missing from a split).",
    )
