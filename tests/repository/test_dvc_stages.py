"""dvc.yaml's stages name code that exists: a dependency path that is gone makes `dvc repro` fail
on every dataset ("No such file or directory"), which only a whole run would otherwise show."""

import yaml
from support.project import ROOT


def test_every_code_dependency_of_every_stage_exists():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    code = [
        (name, dep)
        for name, stage in stages.items()
        for dep in stage["do"]["deps"]
        if dep.startswith(("pipeline/", "stages/"))
    ]
    assert len(code) > 20
    assert [f"{name}: {dep}" for name, dep in code if not (ROOT / dep).is_file()] == []
