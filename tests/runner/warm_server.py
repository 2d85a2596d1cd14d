"""The server of the warm starts (runner/warm_start.py says what they are), run as a file by the
client (runner/warm_client.py's `_spawn`): it imports what a `pipeline` process imports before its
command runs, then forks a child for each client, which becomes that client's process.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

if __name__ == "__main__":  # run as a file: the runner package from the folder above, which then leaves sys.path
    sys.path[0] = os.path.dirname(sys.path[0])
from runner.warm_client import (
    HEAVY,
    IMPORT_DEFAULTS,
    LOGGING,
    LOOKED_UP,
    PROJECT,
    SERVING,
    SET_BY_IMPORTS,
    _read_at_import,
    clashes,
    search_path,
)


def serve(folder: str, name: str, path0: str) -> None:
    """Import what a `pipeline` process imports before its command runs, as it imports it
    (pipeline/log.py's defaults for a process that is not verbose, Keras without its extras),
    then fork a child for each request until the session's folder is gone."""
    import selectors

    del os.environ[SERVING]
    for module in [m for m in sys.modules if m.split(".")[0] == "runner"]:
        del sys.modules[module]  # not a name the children import
    before = dict(os.environ)
    for variable in IMPORT_DEFAULTS:  # what the imports set: as a process that did not inherit it
        if variable not in LOGGING:
            os.environ.pop(variable, None)
    unset = dict(os.environ)
    for variable in LOGGING:
        os.environ.setdefault(variable, IMPORT_DEFAULTS[variable])
    _import(folder, name, path0)
    _note_set_by_imports(folder, {name: value for name, value in os.environ.items() if unset.get(name) != value})
    os.environ.clear()
    os.environ.update(before)
    sys.path[0] = ""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ready = os.path.join(folder, f"{name}.sock")
    listener.bind(f"{ready}.{os.getpid()}")
    listener.listen(16)
    os.rename(f"{ready}.{os.getpid()}", ready)
    with open(os.path.join(folder, f"{name}.pid"), "w", encoding="utf-8") as pid:
        pid.write(str(os.getpid()))
    print(f"serving {ready} after importing {', '.join(HEAVY)}", flush=True)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, ("listener",))
    while os.path.isdir(folder):
        for ready_key, _ in selector.select(timeout=2):
            kind, *about = ready_key.data
            if kind == "listener":
                _accept(listener, selector)
            elif kind == "client":
                _pass_on(ready_key.fileobj, selector, *about)
            else:
                _reap(ready_key.fileobj, selector, *about)


class _LookedFor:
    """The top-level names the imports look for (a finder that finds nothing, first in line)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def find_spec(self, fullname, path, target=None):
        if path is None:
            self.names.add(fullname)
        return None


def _import(folder: str, name: str, path0: str) -> None:
    """HEAVY imported from path0 and the interpreter's own folders (not this process's
    PYTHONPATH: a forked process gets its own), the names they looked for noted (LOOKED_UP), and
    the project's code forgotten again."""
    import importlib

    own = search_path(os.environ.get("PYTHONPATH", ""))
    INTERPRETER[:] = [place for place in sys.path[1:] if place not in own]
    sys.path[:] = [path0, *INTERPRETER]
    looked = _LookedFor()
    sys.meta_path.insert(0, looked)
    importlib.import_module("pipeline.runtime.imports").skip_keras_extras()
    for module in HEAVY:
        importlib.import_module(module)
    sys.meta_path.remove(looked)
    if sys.modules["tensorflow.python.eager.context"].context()._context_handle is not None:
        sys.exit("TensorFlow's runtime started while importing: its TF_NUM_* variables are not runtime's")
    found = {m for m in sys.modules if "." not in m} - set(PROJECT)
    missing = looked.names - found - set(PROJECT)
    shadowing = clashes(path0, found, missing)
    if shadowing:  # imported from path0, which another process does not have
        sys.exit(f"{path0} holds {sorted(shadowing)}, which the imports looked for")
    for module in [m for m in sys.modules if m.split(".")[0] in PROJECT]:
        del sys.modules[module]  # the child imports the project's code from its own path
    path = os.path.join(folder, f"{name}.{LOOKED_UP}")
    with open(f"{path}.{os.getpid()}", "w", encoding="utf-8") as out:
        json.dump([sorted(found), sorted(missing)], out)
    os.replace(f"{path}.{os.getpid()}", path)


INTERPRETER: list[str] = []  # a server's: the folders of sys.path that are not path0's nor PYTHONPATH's


def _note_set_by_imports(folder: str, made: dict[str, str]) -> None:
    """SET_BY_IMPORTS: what this server's imports set that a process's start reads (every server
    imports without IMPORT_DEFAULTS, so each notes the same)."""
    path = os.path.join(folder, SET_BY_IMPORTS)
    with open(f"{path}.{os.getpid()}", "w", encoding="utf-8") as out:
        json.dump({name: value for name, value in made.items() if _read_at_import(name)}, out)
    os.replace(f"{path}.{os.getpid()}", path)


def _accept(listener: socket.socket, selector) -> None:
    """A request read, its child forked; the child's end (its pid) and the client's messages
    (signals, or its end) watched."""
    import selectors

    connection, _ = listener.accept()
    try:
        message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
    except OSError:
        connection.close()
        return
    if not message or len(fds) != 3:
        connection.close()
        for fd in fds:
            os.close(fd)
        return
    request = json.loads(message)
    child = os.fork()
    if child == 0:
        _run(request, fds, selector, connection)
    for fd in fds:
        os.close(fd)
    selector.register(connection, selectors.EVENT_READ, ("client", child, request["group"]))
    selector.register(os.pidfd_open(child), selectors.EVENT_READ, ("child", child, connection))


def _pass_on(connection, selector, child: int, group: bool) -> None:
    """A signal the client received, sent on; the client gone (killed), its child killed too.
    To the child's process group when the client led one of its own (what kills a client's
    group would have killed its children: a server that `exec`s, `pipeline serve`'s, included)."""
    try:
        message = connection.recv(64)
    except OSError:
        message = b""
    if not message:
        selector.unregister(connection)
    try:
        (os.killpg if group else os.kill)(child, int(message) if message else signal.SIGKILL)
    except ProcessLookupError:  # ended meanwhile
        pass


def _reap(pidfd, selector, child: int, connection: socket.socket) -> None:
    """The child's status to its client, as `waitpid` gave it."""
    selector.unregister(pidfd)
    os.close(pidfd)
    _, status = os.waitpid(child, 0)
    if connection.fileno() in selector.get_map():
        selector.unregister(connection)
    try:
        connection.send(json.dumps({"status": status}).encode())
    except OSError:  # the client was killed, and the child after it
        pass
    connection.close()


def _run(request: dict, fds: list[int], selector, connection: socket.socket) -> None:
    """In the child: become the client's process, run its command, exit as python would."""
    import importlib

    for registered in list(selector.get_map().values()):  # the server's
        if registered.data[0] == "child":
            os.close(registered.fileobj)
        else:
            registered.fileobj.close()
    selector.close()
    connection.close()
    os.setpgid(0, 0)  # a group of its own, which the server signals when the client led one
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCHLD"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    os.umask(request["umask"])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.stdout.flush()
    sys.stderr.flush()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.orig_argv = request["cmdline"]
    ahead = [request["path0"], *request["pythonpath"]]  # as site.py makes it: PYTHONPATH's first, each once
    sys.path[:] = ahead + [place for place in INTERPRETER if place not in request["pythonpath"]]
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = None  # type: ignore[attr-defined]
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()  # a fresh process seeds it from the OS
    importlib.invalidate_caches()
    _census(request)
    os._exit(_main(request))


def _census(request: dict) -> None:
    """The count of tests/census_hook.py, when it runs: a process that has TensorFlow."""
    for finder in sys.meta_path:
        if type(finder).__name__ == "_Watcher":
            record = type(finder).find_spec.__globals__["record"]
            record("tensorflow", argv=request["cmdline"][:3], warm=True)
            return


def _main(request: dict) -> int:
    """The command run as `python` runs a module or a script: a fresh `__main__`, the exit code of
    SystemExit, an uncaught exception's traceback and 1, non-daemon threads joined, atexit run."""
    import atexit
    import runpy
    import threading
    import types

    sys.modules["__main__"] = types.ModuleType("__main__")
    interrupted = False
    try:
        if request["script"]:
            sys.argv = [request["script"], *request["args"]]
            runpy.run_path(request["script"], run_name="__main__")
        else:
            sys.argv = ["-m", *request["args"]]
            runpy._run_module_as_main(request["module"])  # type: ignore[attr-defined]
        code = 0
    except SystemExit as exit:
        code = _exit_code(exit.code)
    except BaseException as error:
        # the traceback python prints: from the script's frame, or from runpy's for a module
        frames = error.__traceback__
        while frames is not None and not _first_frame(frames.tb_frame.f_code, request["script"]):
            frames = frames.tb_next
        sys.excepthook(type(error), error.with_traceback(frames), frames)
        code, interrupted = 1, isinstance(error, KeyboardInterrupt)
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


def _first_frame(code, script: str | None) -> bool:
    if script:
        return code.co_filename == script
    return code.co_filename == "<frozen runpy>" and code.co_name == "_run_module_as_main"


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__" and sys.argv[1:2] == ["serve"]:
    serve(*sys.argv[2:5])
