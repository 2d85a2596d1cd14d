"""The registry of the kinds of dataset: `KINDS` by the name a params file gives
(`preprocess.<ds>.kind`), `FORMS` by what their prepared splits hold, `TEMPLATES` by the params
file's add.<template> sections. A kind is registered by one entry in `KINDS`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

from pipeline.kinds import image_folders, labelled_texts, tables
from pipeline.kinds.image_folders import ImageFoldersPreprocessConfig
from pipeline.kinds.labelled_texts import ReutersPreprocessConfig, TextTablePreprocessConfig
from pipeline.kinds.tables import TablePreprocessConfig

if TYPE_CHECKING:
    from pipeline.kinds.kind import Kind

KINDS: dict[str, Kind] = {kind.name: kind for kind in (labelled_texts.KIND, image_folders.KIND, tables.KIND)}
# the kinds by what their prepared splits hold (a prepared folder's description's `input`)
FORMS: dict[str, Kind] = {kind.form: kind for kind in KINDS.values()}
# the params file's templates (its add.<template> sections), each of one kind
TEMPLATES: dict[str, str] = dict(
    sorted((template, kind.name) for kind in KINDS.values() for template in kind.templates)
)

# a preprocess section of any dataset
PreprocessConfig = Union[
    ReutersPreprocessConfig, TextTablePreprocessConfig, ImageFoldersPreprocessConfig, TablePreprocessConfig
]
