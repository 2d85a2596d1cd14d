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


SHARED = {"--json": "as_json", "-S": "overrides", "--dataset": None, "--data": "data", "--host": "host"}


def test_the_shared_options_are_defined_in_options_alone():
    """The group (cli.py) and its commands (pipeline/commands/) take each shared option from
    pipeline/options.py: no copy of it to drift apart."""
    import ast

    from support.project import ROOT

    sources = [ROOT / "pipeline" / "cli.py", *sorted((ROOT / "pipeline" / "commands").glob("*.py"))]
    assert len(sources) > 12, "the commands have left pipeline/commands/"
    literals = [
        node.value
        for source in sources
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.Constant) and node.value in SHARED
    ]
    assert literals == ["--json"]  # bench's --json FILE, a file to write: another option


def test_each_shared_option_reads_the_same_wherever_it_is_taken():
    import click

    ctx = click.Context(cli)
    seen: dict[str, set] = {}
    for name in cli.list_commands(ctx):
        for param in cli.get_command(ctx, name).params:
            for opt in set(param.opts) & set(SHARED):
                if opt == "--json" and not param.is_flag:  # bench's --json FILE: a file to write
                    continue
                seen.setdefault(opt, set()).add((param.name, param.multiple, param.metavar, param.type.name))
    assert {opt: len(kinds) for opt, kinds in seen.items()} == {
        "--json": 1,
        "-S": 1,
        "--dataset": 2,
        "--data": 1,
        "--host": 1,
    }
    assert seen["-S"] == {("overrides", True, "KEY=VALUE", "text")}
    assert {kind[:2] for kind in seen["--dataset"]} == {("dataset", False), ("datasets", True)}
