"""The client of the warm starts (runner/warm_start.py says what they are): run by a `.pth` line at
the start of every Python process of the suite's environment, it asks the session's server for
a process that qualifies, and otherwise lets the start go on. What it shares with the server
(runner/warm_server.py): the session's variables, what the server imports (HEAVY) and which
variables decide it. Standard library only: it runs in every Python process of the session.
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
    tests = os.path.dirname(os.path.dirname(os.path.realpath(globals().get("__file__", ""))))
    workers = os.path.join(tests, "workers")
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
            server = os.path.join(os.path.dirname(globals()["__file__"]), "warm_server.py")
            os.execv(sys.executable, [sys.executable, server, "serve", folder, name, path0])
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


if __name__ == "warm_start_hook":
    client()
