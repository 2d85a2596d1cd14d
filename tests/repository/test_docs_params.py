"""docs/own-data.md's complete example sections are valid params: pasted beside the shipped
datasets, as its readers paste them, the file validates (a key the schema gained is in the page
too). tests/scenarios/test_own_data.py runs them; this finds a stale page in a second."""

import yaml
from pytest_codeblocks import extract_from_file
from support.project import ROOT

from pipeline.config.loading import loader

PAGE = ROOT / "docs" / "own-data.md"


def test_the_pages_example_sections_validate_beside_the_shipped_datasets():
    blocks = [yaml.safe_load(b.code) for b in extract_from_file(PAGE) if b.syntax == "yaml"]
    sections = [b for b in blocks if isinstance(b, dict) and "download" in b]
    assert len(sections) == 2
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for block in sections:
        for stage, per_dataset in block.items():
            params[stage].update(per_dataset)
    loader.validate(params, str(PAGE))
