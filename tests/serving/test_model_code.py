"""The logged model's definition from code: MLflow runs pipeline/serving/model_code.py when it loads
the model, and gets the pyfunc class of pipeline.serving.classifier (not a pickle)."""

from __future__ import annotations

from support.processes import run_python
from support.project import ROOT


def test_the_file_defines_the_classifier_for_mlflow():
    code = (
        "import runpy, mlflow.models.model as m\n"
        "runpy.run_path(%r)\n"
        "print(type(m.__mlflow_model__).__module__, type(m.__mlflow_model__).__name__)"
    )
    result = run_python(code % str(ROOT / "pipeline" / "serving" / "model_code.py"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["pipeline.serving.classifier", "Classifier"]
