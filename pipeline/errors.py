"""Errors the pipeline reports to a user as one line, with the exit code they map to."""

from __future__ import annotations

from pipeline import log


class PipelineError(Exception):
    """An expected failure: the CLI prints its message on one line and exits with `exit_code`."""

    exit_code = 1

    def __init__(self, message: str):
        # one line by construction: a library's multi-line message folded in
        super().__init__(" ".join(str(message).split()))


class ConfigError(PipelineError):
    """A usage or configuration error (params.yaml, CLI arguments, device requests)."""

    exit_code = 2


class DataError(PipelineError):
    """Input data that cannot be read or does not have the expected shape or content."""


class DownloadError(PipelineError):
    """A file that could not be fetched or did not verify."""


class ClusterError(PipelineError):
    """A worker of the cluster went away mid-training, or did not answer at start. Exit code 1:
    the run failed, not the params nor the code; it resumes from its backup when run again."""


class TrackingError(PipelineError):
    """The MLflow tracking store does not answer, refuses the credentials, or cannot store.
    Exit code 1: the params are fine; the server, the network or the credentials are not."""


class OutputError(PipelineError):
    """An output cannot be written where it goes: a full disk or quota, a read-only or foreign
    folder. Nothing of the stage's outputs is left half-written."""


class StudyError(PipelineError):
    """A study's storage cannot be opened or reached, or the study is not the one asked for."""


class ServerError(PipelineError):
    """A server this process starts (the MLflow UI, the model server) cannot be served: its port
    cannot be bound (another program holds it, or the host has no such address), or it stopped
    on its own."""


def report(call) -> int:
    """Run `call`; its exit code (None: 0). The one boundary where failures become one `error:`
    line: a PipelineError with its own code, Ctrl+C 130, anything else 1 as a bug (its traceback
    with -v). The `pipeline` command and the processes it starts run under it."""
    try:
        return call() or 0
    except PipelineError as exc:
        return log.fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        return log.fail("interrupted", 130)
    except Exception as exc:  # a bug: one line here, the traceback with -v
        return log.fail(
            f"unexpected {type(exc).__name__}: {exc}; this is a bug: run the command again "
            f"with `pipeline -v` to see where",
            1,
            trace=True,
        )
