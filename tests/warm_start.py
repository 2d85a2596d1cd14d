"""Warm starts: a `pipeline` process of the suite that begins with TensorFlow, Keras and MLflow
already imported, forked from a server that imported them once, instead of importing them itself.

Most of the suite's work is `pipeline` processes (the stages `dvc` runs, the commands the tests
run), and most of what each costs on fixture data is importing TensorFlow, Keras and MLflow
(docs/testing.md, "Where the time goes"). While a session runs, a `.pth` line in the environment's
site-packages runs this file at the start of every Python process of the environment (`client`):

- a process that is `python -m pipeline ARGS` (or `-m pipeline.MODULE`), the `pipeline` script
  or a script of tests/workers, not verbose, not on a terminal, with no descriptors but 0, 1, 2, as
  the session's user, in its namespaces and cgroup (`context`), asks the server for its
  environment (the variables read at import time, the interpreter, the resource limits:
  `identity`) to fork a process that runs its command;
- the server's child takes the client's arguments, working directory, environment, umask,
  standard streams (passed as descriptors) and sys.path (its path0 and PYTHONPATH's folders,
  when they hold nothing by a name the server's imports looked for: `_shadowed`), imports the
  project's code from there, runs the command as `python` would run it (`__main__`,
  `sys.argv`, exit code, uncaught exceptions, atexit) and exits; the client exits with its
  status (a signal's included) and
  passes on the signals it receives; a client that is killed takes the child with it;
- a process that does not qualify, or whose environment has no server yet, starts as usual: the
  second such start of an environment starts its server (`serve`) in the background.

What a test checks of a process's own start (its imports, what it prints while it starts, its
signals and memory) is checked on a process that started as usual: such tests are marked
`cold_start` (tests/conftest.py takes the variable out of their environment). Standard library
only: it runs in every Python process of the session. tests/conftest.py starts it (`start`) and
stops it (`stop`); `PIPELINE_TEST_WARM=` (empty) turns it off for a whole run.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import sys

VARIABLE = "PIPELINE_TEST_WARM"  # the session's folder: the servers' sockets, pids, logs
CONTEXT = "PIPELINE_TEST_WARM_CONTEXT"  # the session's `context()`
SERVING = "PIPELINE_TEST_WARM_SERVING"  # in a server's own environment while it starts
PTH = "pipeline-test-warm.pth"
SEEN = "_pipeline_test_warm_start"  # in sys.modules once a process's start was looked at
HEAVY = ("tensorflow", "keras", "mlflow", "mlflow.pyfunc", "mlflow.models", "mlflow.store.tracking.sqlalchemy_store")
# what the project's code reads when it runs, not what the imports of HEAVY read
# (_MP_FORK_*: what DVC's queue workers pass on to their children for logging; MAKE*: make's;
# VIRTUAL_ENV*: what `source .venv/bin/activate` sets, which Python and these imports never read)
RUNTIME_PREFIXES = ("PYTEST_", "DVC_", "GIT_", "MLFLOW_", "_MLFLOW_", "PIPELINE_", "CELERY_", "_MP_FORK_")
RUNTIME_NAMES = {"PATH", "PWD", "OLDPWD", "SHLVL", "_", "PS1", "TF_CONFIG", "COLUMNS", "LINES", "MLFLOW_REGISTRY_URI"}
RUNTIME_NAMES |= {"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "VIRTUAL_ENV", "VIRTUAL_ENV_PROMPT"}
RUNTIME_NAMES.add("TPU_ML_PLATFORM_VERSION")  # TensorFlow's version, which TensorFlow sets (IMPORT_DEFAULTS)
# read when TensorFlow's runtime starts (its first op), which a server's imports do not start
# (`serve` checks): what `pipeline tune`'s workers set
RUNTIME_NAMES |= {"TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS"}
# what importing TensorFlow, Keras and MLflow sets in the environment (pipeline/log.py's defaults
# first), which the children of a process that imported them inherit: at these values, what the
# imports would make of their absence (TPU_ML_PLATFORM_VERSION, the version, is read by no import
# on a CPU or GPU host). A server imports without them, as a process that did not inherit them
# does, and notes what its imports set in the session's folder (SET_BY_IMPORTS), which
# tests/repository/test_warm_start.py holds this list to.
IMPORT_DEFAULTS = {
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "MLFLOW_LOGGING_LEVEL": "WARNING",
    "TF2_BEHAVIOR": "1",
    "ENABLE_RUNTIME_UPTIME_TELEMETRY": "1",
    "TPU_ML_PLATFORM": "Tensorflow",
    "HDF5_PLUGIN_PATH": "disable",
}
SET_BY_IMPORTS = "set-by-imports.json"
LOOKED_UP = "looked-up.json"  # KEY.looked-up.json: the top-level names a server's imports found, and did not
PROJECT = ("pipeline", "stages")  # the code a forked process imports from its own path
LOGGING = ("TF_CPP_MIN_LOG_LEVEL", "MLFLOW_LOGGING_LEVEL")  # pipeline/log.py's, set before the imports
IMPORT_TIME = {"MLFLOW_LOGGING_LEVEL", "MLFLOW_CONFIGURE_LOGGING", "PIPELINE_TEST_CENSUS", VARIABLE, CONTEXT}
LIMITS = ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_NOFILE", "RLIMIT_STACK", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NPROC")
# the lines of /proc/self/status that a forked process would take from its server
STATUS = ("Uid:", "Gid:", "Groups:", "Cap", "NoNewPrivs:", "Seccomp:", "Cpus_allowed_list:", "Mems_allowed_list:")
CUSTOMIZE = ("sitecustomize", "usercustomize")  # what site.py imports after the `.pth` lines
SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


def context() -> str:
    """What a process is given besides its environment and is not handed over: its users and
    groups, capabilities, seccomp and no_new_privs, CPUs, niceness, namespaces and cgroup. A warm
    start only where they are the session's (not in a Slurm job's namespaces, a test's cgroup,
    as another user, under `setpriv` or `taskset`)."""
    spaces = [os.readlink(f"/proc/self/ns/{name}") for name in ("mnt", "net", "pid", "uts", "ipc", "user")]
    with open("/proc/self/status", encoding="utf-8") as status:
        given = [line for line in status.read().splitlines() if line.startswith(STATUS)]
    with open("/proc/self/cgroup", encoding="utf-8") as cgroup:
        return json.dumps([given, os.getpriority(os.PRIO_PROCESS, 0), cgroup.read().strip(), spaces])


def identity() -> str:
    """What a process imports depends on: the interpreter, the environment's variables (but
    RUNTIME's, IMPORT_DEFAULTS at those values and PYTHONPATH) and the resource limits."""
    import resource

    env = {
        name: value
        for name, value in os.environ.items()
        if _read_at_import(name) and IMPORT_DEFAULTS.get(name) != value
    }
    env.pop("PYTHONPATH", None)  # a forked process gets its own sys.path (`_shadowed` checks it would import the same)
    limits = [resource.getrlimit(getattr(resource, name)) for name in LIMITS]
    return json.dumps([sys.executable, sys.prefix, sorted(env.items()), limits], indent=1)


def search_path(pythonpath: str) -> list[str]:
    """PYTHONPATH's entries as site.py puts them on sys.path: each absolute (an empty one is the
    working directory) and normalised, and once."""
    entries: list[str] = []
    for entry in pythonpath.split(os.pathsep) if pythonpath else ():
        entry = os.path.normcase(os.path.abspath(entry))
        if entry not in entries:
            entries.append(entry)
    return entries


def _read_at_import(name: str) -> bool:
    return (name not in RUNTIME_NAMES and not name.startswith(RUNTIME_PREFIXES)) or name in IMPORT_TIME


def cmdline() -> list[str]:
    """This process's command line, as it was exec'd (sys.argv is not there yet when site.py runs)."""
    with open("/proc/self/cmdline", "rb") as words:
        return [os.fsdecode(word) for word in words.read().split(b"\0")[:-1]]


def command(words: list[str]) -> dict | None:
    """A process's command (`words`), when it is one a server can start: `python -m pipeline ARGS`
    (or a module of the package: the workers of `pipeline tune`, `bench` and `selftest`), the
    environment's `pipeline` script or a worker script of the suite, without -v, and
    without a sitecustomize of its own (which a test uses to patch the code it runs)."""
    module = None
    if len(words) > 2 and words[1] == "-m" and (words[2] == "pipeline" or words[2].startswith("pipeline.")):
        args, script, path0, module = words[3:], None, os.getcwd(), words[2]
    elif len(words) > 1 and not words[1].startswith("-") and _startable(os.path.abspath(words[1])):
        script = os.path.abspath(words[1])
        args, path0 = words[2:], os.path.dirname(script)
    else:
        return None
    if any(arg == "--verbose" or (arg.startswith("-v") and set(arg[1:]) == {"v"}) for arg in args):
        return None
    for folder in os.environ.get("PYTHONPATH", "").split(os.pathsep):  # code that runs before the command
        if folder and any(os.path.exists(os.path.join(folder, f"{name}.py")) for name in CUSTOMIZE):
            return None
    return {"cmdline": words, "args": args, "script": script, "module": module, "path0": path0}


def _startable(script: str) -> bool:
    """The environment's `pipeline` script, or one of the suite's worker scripts (tests/workers)."""
    folder = os.path.realpath(os.path.dirname(script))
    if os.path.basename(script) == "pipeline":
        return folder == os.path.realpath(os.path.dirname(sys.executable))
    workers = os.path.join(os.path.dirname(os.path.realpath(globals().get("__file__", ""))), "workers")
    return script.endswith(".py") and folder == workers


def _only_standard_streams() -> bool:
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            try:
                target = os.readlink(f"/proc/self/fd/{name}")
            except OSError:  # the listing's own descriptor, closed by now
                continue
            if not target.endswith(".pth"):  # site.py's, while it reads the .pth file
                return False
    return not (os.isatty(1) or os.isatty(2))


def client() -> None:
    """At the start of a process: run its command in a server's child and exit with its status,
    or return (a normal start)."""
    folder = os.environ.get(VARIABLE, "")
    if not folder or os.environ.get(SERVING) or not os.path.isdir(folder) or SEEN in sys.modules:
        return
    sys.modules[SEEN] = type(sys)(SEEN)  # once: site.py may run a `.pth` line twice (a venv's lib64 -> lib link)
    request = command(cmdline())
    if request is None or os.environ.get(CONTEXT) != context() or not _only_standard_streams():
        return
    described = identity()
    name = hashlib.sha256(described.encode()).hexdigest()[:16]
    request["pythonpath"] = search_path(os.environ.get("PYTHONPATH", ""))
    if _shadowed(folder, name, [request["path0"], *request["pythonpath"]]):
        return
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        connection.connect(os.path.join(folder, f"{name}.sock"))
    except OSError:
        connection.close()
        _sighted(folder, name, request["path0"], described)
        return
    umask = os.umask(0)
    os.umask(umask)
    request.update(cwd=os.getcwd(), env=dict(os.environ), umask=umask, group=os.getpgrp() == os.getpid())
    _delegate(connection, request)


def modules_in(folder: str) -> tuple[set[str], set[str]]:
    """The top-level names `folder` holds as modules (a file with a suffix Python imports) or
    regular packages, and as directories without `__init__` (namespace portions, which only a name
    found nowhere else imports). An archive on the path holds everything."""
    import importlib.machinery

    try:
        entries = os.listdir(folder)
    except NotADirectoryError:
        return {"*"}, {"*"}
    except OSError:
        return set(), set()
    suffixes = importlib.machinery.all_suffixes()
    modules: set[str] = set()
    portions: set[str] = set()
    for entry in entries:
        path = os.path.join(folder, entry)
        if os.path.isdir(path):
            init = any(os.path.exists(os.path.join(path, f"__init__{suffix}")) for suffix in suffixes)
            (modules if init else portions).add(entry)
        else:
            modules.update(entry[: -len(suffix)] for suffix in suffixes if entry.endswith(suffix))
    return modules, portions


def _shadowed(folder: str, name: str, ahead: list[str]) -> bool:
    """Whether a folder that comes before the interpreter's own on this process's sys.path (its
    path0 and PYTHONPATH's) holds a module by a name the server's imports looked for (found or
    not: `LOOKED_UP`), which this process would have imported from there, or a namespace
    portion by a name they did not find. No server yet: not known, and not needed."""
    try:
        with open(os.path.join(folder, f"{name}.{LOOKED_UP}"), encoding="utf-8") as noted:
            found, missing = (set(names) for names in json.load(noted))
    except FileNotFoundError:
        return False
    return any(clashes(place, found, missing) for place in ahead)


def clashes(place: str, found: set[str], missing: set[str]) -> set[str]:
    """The names of `found` and `missing` that `place`, ahead of the interpreter's own folders on
    sys.path, would import instead of what was found, or instead of nothing."""
    modules, portions = modules_in(place)
    if "*" in modules:
        return {"*"}
    return modules & (found | missing) | portions & missing


def _sighted(folder: str, name: str, path0: str, described: str) -> None:
    """The first start of an environment is only noted (with what it is); the second starts its
    server."""
    for mark in (f"{name}.seen", f"{name}.started"):
        try:
            fd = os.open(os.path.join(folder, mark), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue
        os.write(fd, described.encode())
        os.close(fd)
        if mark.endswith(".started"):
            _spawn(folder, name, path0)
        return


def _spawn(folder: str, name: str, path0: str) -> None:
    """The server, started twice forked (nobody's child), its output in the folder's log."""
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        return
    try:
        os.setsid()
        if os.fork() == 0:
            log = os.open(os.path.join(folder, f"{name}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.closerange(3, 65536)
            os.chdir("/")
            os.environ[SERVING] = "1"
            hook = globals()["__file__"]
            os.execv(sys.executable, [sys.executable, hook, "serve", folder, name, path0])
    finally:
        os._exit(0)


def _delegate(connection: socket.socket, request: dict) -> None:
    socket.send_fds(connection, [json.dumps(request).encode()], [0, 1, 2])

    def forward(number, frame):
        try:
            connection.send(str(number).encode())
        except OSError:
            pass

    for name in SIGNALS:
        signal.signal(getattr(signal, name), forward)
    reply = connection.recv(1 << 16)
    if not reply:  # the server is gone, and its child with it
        os.write(2, b"error: the warm-start server of the test session went away\n")
        os._exit(1)
    status = json.loads(reply)["status"]
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    os._exit(os.waitstatus_to_exitcode(status))


# --- the server -------------------------------------------------------------------------------


def serve(folder: str, name: str, path0: str) -> None:
    """Import what a `pipeline` process imports before its command runs, as it imports it
    (pipeline/log.py's defaults for a process that is not verbose, Keras without its extras),
    then fork a child for each request until the session's folder is gone."""
    import selectors

    del os.environ[SERVING]
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


# --- the session ------------------------------------------------------------------------------


def pth_line() -> str:
    """The `.pth` line that runs `client` at every start of the environment's Python (the
    census's, tests/census.py, for this file)."""
    from pathlib import Path

    import census

    return census.pth_line(Path(__file__), VARIABLE, "warm_start_hook")


def start(site_packages: str) -> str:
    """The `.pth` line in place and the session's folder made; the caller sets VARIABLE to it and
    CONTEXT to `context()` in the session's environment, which its processes inherit."""
    import tempfile

    with open(os.path.join(site_packages, PTH), "w", encoding="utf-8") as pth:
        pth.write(pth_line())
    return tempfile.mkdtemp(prefix="pipeline-warm-")


def stop(folder: str, site_packages: str) -> int:
    """The `.pth` line removed, the servers stopped, the folder removed; how many servers ran."""
    try:
        os.unlink(os.path.join(site_packages, PTH))
    except FileNotFoundError:
        pass
    return stop_servers(folder)


def stop_servers(folder: str) -> int:
    """The folder's servers stopped and the folder removed; how many servers ran."""
    import shutil

    servers = 0
    for entry in os.listdir(folder) if os.path.isdir(folder) else ():
        if entry.endswith(".pid"):
            servers += 1
            try:
                with open(os.path.join(folder, entry), encoding="utf-8") as pid:
                    os.kill(int(pid.read()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
    shutil.rmtree(folder, ignore_errors=True)
    return servers


if __name__ == "warm_start_hook":
    client()
elif __name__ == "__main__" and sys.argv[1:2] == ["serve"]:
    serve(*sys.argv[2:5])
