"""pipeline/config/keys/model_table.py: every model of a kind's table names its settings and a
builder that exists, without importing TensorFlow to say so."""

import ast
import dataclasses
import importlib.util

from support.project import ROOT

from pipeline.config.keys.model_table import MODELS


def test_every_builder_named_is_a_function_of_its_module():
    for kind, table in MODELS.items():
        for name, model in table.items():
            module, _, function = model.builder.partition(":")
            spec = importlib.util.find_spec(module)
            assert spec is not None and spec.origin, model.builder
            tree = ast.parse(open(spec.origin).read())
            assert function in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, model.builder
            assert dataclasses.is_dataclass(model.settings) and model.help, (kind, name)


def test_the_table_is_what_the_params_file_can_name():
    params = (ROOT / "params.yaml").read_text()
    for table in MODELS.values():
        for name in table:
            assert f"    {name}:\n" in params, f"params.yaml holds no settings of {name}"
