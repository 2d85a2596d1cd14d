"""The logged model's definition, from code (MLflow's models-from-code): MLflow runs this file
when it loads the model; the class is `pipeline.serving.Classifier`."""

import mlflow.models

from pipeline.serving import Classifier

mlflow.models.set_model(Classifier())
