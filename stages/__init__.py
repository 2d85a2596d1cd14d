"""One thin module per DVC stage: parse paths, load config, call the library, write outputs.

Each module exposes a click `command`; `pipeline.cli` loads it only when it is invoked, and
each module imports TensorFlow only inside its command, after the config has validated.
"""
