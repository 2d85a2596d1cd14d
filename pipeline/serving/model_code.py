"""The logged model's definition, from code (MLflow's models-from-code): MLflow runs this file
when it loads the model; the class is `pipeline.serving.classifier.Classifier`."""

import mlflow.models

from pipeline.serving.classifier import Classifier

mlflow.models.set_model(Classifier())
