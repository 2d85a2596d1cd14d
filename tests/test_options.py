"""pipeline.options: every command that reads the params file takes the one --params option."""

from pathlib import Path

from pipeline.cli import cli

READS_PARAMS = ("bench", "devices", "doctor", "params", "download", "preprocess", "train", "evaluate")


def test_every_command_that_reads_params_takes_the_shared_option():
    import click

    ctx = click.Context(cli)
    for name in READS_PARAMS:
        command = cli.get_command(ctx, name)
        (option,) = [p for p in command.params if p.name == "params_path"]
        assert option.opts == ["--params"], name
        assert (option.default, option.type.type, option.show_default) == (Path("params.yaml"), Path, True), name
        assert option.help == "The params file (defaults live there and nowhere else).", name
