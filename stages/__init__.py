"""One thin module per DVC stage: parse paths, load config, call the library, write outputs.

Each module exposes a click `command`, registered as an entry point of group
`pipeline.stages` (pyproject.toml); `pipeline.cli` loads it when it is listed or invoked, and
each module imports TensorFlow only inside its command, after the config has validated.
"""
