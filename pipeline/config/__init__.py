"""The params file: its keys (`schema`), how it is read, overridden and checked (`loader`), the
tuning search spaces it declares (`search_space`) and what each key means (`params_doc`). No
TensorFlow: a config error stops any command in well under a second."""
