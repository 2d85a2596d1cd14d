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


def training_modules_reached_from(path: str) -> set[str]:
    """pipeline/training's modules that `path` imports, directly or through one another."""
    import ast

    seen: set[str] = set()
    todo = [path]
    while todo:
        tree = ast.parse((ROOT / todo.pop()).read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                module = name.replace(".", "/") + ".py"
                if name.startswith("pipeline.training.") and (ROOT / module).is_file() and module not in seen:
                    seen.add(module)
                    todo.append(module)
    return seen


def test_the_train_stage_depends_on_every_training_module_it_runs():
    """A training module the train stage runs but does not list would leave `dvc repro` with a
    stale model when it changes."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    reached = training_modules_reached_from("stages/train.py")
    assert "pipeline/training/batchnorm.py" in reached
    assert sorted(reached - set(stages["train"]["do"]["deps"])) == []
