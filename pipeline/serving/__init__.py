"""The model a user gets: the MLflow pyfunc that answers raw inputs (`classifier`, loaded from
`model_code`), the model registry and its promotion gate (`registry`), and MLflow's model server
on a registered version (`server`)."""
