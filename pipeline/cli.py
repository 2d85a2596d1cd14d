"""The `pipeline` command: its group, the DVC stages' commands, and the commands around them
(`add`, `bench`, `compare`, `devices`, `doctor`, `params`, `promote`, `remove`, `selftest`,
`serve`, `tune` and `ui`), a module each in pipeline/commands/, listed in one place below; `main`
makes every failure one line.

The stage commands live in the application layer (`stages/`) and are found through the
package's entry points (group `pipeline.stages`, in pyproject.toml), so the library never
imports them, and each is imported only when listed or invoked: `pipeline --help` (and any
config error) never imports TensorFlow.
"""

from __future__ import annotations

import difflib
import sys
import time
from importlib.metadata import entry_points

import click

from pipeline import errors, log
from pipeline.commands import add, bench, compare, devices, doctor, params, promote, remove, selftest, serve, tune, ui
from pipeline.config.keys.schema import STAGES
from pipeline.runtime import imports, usage

STAGE_ENTRY_POINTS = "pipeline.stages"


class LazyGroup(click.Group):
    """A group whose stage commands are loaded from entry points on first use."""

    def _stages(self) -> dict:
        found = {ep.name: ep for ep in entry_points(group=STAGE_ENTRY_POINTS)}
        return {name: found[name] for name in [*STAGES, *sorted(found)] if name in found}

    def list_commands(self, ctx):
        return [*self._stages(), *super().list_commands(ctx)]

    def get_command(self, ctx, name):
        stage = self._stages().get(name)
        if stage is None and name in STAGES:
            # run from a clone without `pip install -e .`: no package metadata, no entry points
            raise click.UsageError(
                f"the stage command {name!r} is not installed: run `pip install -e .` "
                f"in the repository (the stages are found through its entry points)"
            )
        return stage.load() if stage is not None else super().get_command(ctx, name)

    def resolve_command(self, ctx, args):
        # click suggests only among the commands defined here, not the stages: suggest among all
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            hint = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            raise click.UsageError(f"No such command {name!r}." + (f" Did you mean {hint[0]!r}?" if hint else ""), ctx)
        return super().resolve_command(ctx, args)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pipeline", message="%(prog)s %(version)s")
@click.option("-v", "--verbose", is_flag=True, help="Also show details, and TensorFlow's, Keras' and MLflow's notices.")
@click.option("-q", "--quiet", is_flag=True, help="Show warnings and errors only.")
def cli(verbose, quiet):
    """Reproducible experiments: download, preprocess, train (tf.distribute) and evaluate
    the Reuters and MNIST datasets. DVC runs the stages (`dvc repro`); MLflow records the runs
    (`mlflow ui`). Defaults live in params.yaml."""
    log.configure(1 if verbose else -1 if quiet else 0)
    usage.limit_malloc_arenas()
    imports.skip_keras_extras()
    click.get_current_context().meta["pipeline.started"] = time.perf_counter()


@cli.result_callback()
def stage_finished(_result, **_options):
    """After a stage that succeeded: its wall time and peak memory, one line on stderr."""
    ctx = click.get_current_context()
    if ctx.invoked_subcommand in STAGES:
        seconds = time.perf_counter() - ctx.meta["pipeline.started"]
        where = " ".join(filter(None, (ctx.invoked_subcommand, ctx.meta.get("pipeline.dataset"))))
        log.log.info("%s: done in %.1f s, peak memory %s MB", where, seconds, f"{usage.peak_rss_mb():,.0f}")


# The table of contents: the commands around the stages, a module each in pipeline/commands/,
# named for its command, which it defines as `<name>_command` (`pipeline --help` lists them by
# name, after the stages).
for module in (devices, params, add, remove, bench, doctor, selftest, tune, promote, serve, compare, ui):
    cli.add_command(getattr(module, f"{module.__name__.rpartition('.')[2]}_command"))


def main(args=None) -> None:
    """`pipeline`: its arguments parsed and the command run, every failure one `error:` line and
    an exit code (pipeline.errors.report): 2 for usage and config errors, 1 for data,
    download and tracking errors and for anything unexpected, 130 for Ctrl+C."""
    sys.exit(errors.report(lambda: _parse_and_run(args)))


def _parse_and_run(args) -> int:
    try:
        return cli.main(args=args, prog_name="pipeline", standalone_mode=False)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "pipeline"
        return log.fail(f"{where}: {exc.format_message()} (see '{where} --help')", exc.exit_code)
    except click.ClickException as exc:
        return log.fail(exc.format_message(), exc.exit_code)
    except click.Abort:
        raise KeyboardInterrupt from None
