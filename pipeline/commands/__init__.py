"""The commands of the `pipeline` group around the DVC stages, one module each, named for its
command: each defines its click command `<name>_command`, takes the options the commands share
from pipeline.options and hands the work to the library; pipeline/cli.py lists them."""
