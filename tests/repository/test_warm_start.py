"""tests/runner/warm_start.py: a process forked warm by a server sees what it would see started as
usual (its arguments, directory, environment, umask, streams, `__main__`), ends the same way
(exit codes, uncaught exceptions, atexit), passes signals on and dies with its client; a
process that does not qualify starts as usual. On a server of this test's own."""

import json
import os
import signal
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
from runner import warm_client, warm_start
from support.processes import subprocess_env
from support.project import ROOT
from support.servers import wait_for

FACTS = ROOT / "tests" / "workers" / "process_facts.py"
SITE = sysconfig.get_paths()["purelib"]


@pytest.fixture(scope="module")
def warm():
    """A folder of this module's own, its server started (the second sighting starts it) and
    ready; the environment that uses it, and the one that starts as usual."""
    pth = Path(SITE) / warm_client.PTH
    wrote = not pth.exists()  # a session with warm starts turned off has none
    if wrote:
        pth.write_text(warm_start.pth_line())
    folder = tempfile.mkdtemp(prefix="pipeline-warm-test-")
    env = subprocess_env(
        **{warm_client.VARIABLE: folder, warm_client.CONTEXT: warm_client.context(), "FACTS_VARIABLE": "set"}
    )
    cold = {**env, warm_client.VARIABLE: ""}
    try:
        for _ in range(2):
            assert not facts(env).tensorflow
        wait_for("the server", lambda: any(n.endswith(".sock") for n in os.listdir(folder)), timeout=300)
        yield env, cold
    finally:
        assert warm_start.stop_servers(folder) == 1
        if wrote:
            pth.unlink()


class Facts:
    def __init__(self, done: subprocess.CompletedProcess):
        self.done = done
        self.seen = json.loads(done.stdout.splitlines()[0])
        self.tensorflow = self.seen.pop("tensorflow")
        self.pid = self.seen.pop("pid")


def facts(env, *args, cwd=None, stdin="", **options) -> Facts:
    done = subprocess.run(
        [sys.executable, str(FACTS), *args],
        env=env,
        cwd=cwd or ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        **options,
    )
    return Facts(done)


@pytest.mark.parametrize(
    "args,code",
    [((), 0), (("exit", "3"), 3), (("raise",), 1), (("message", "it went wrong"), 1), (("exit", "258"), 2)],
)
def test_a_warm_start_sees_and_ends_as_a_normal_one(warm, tmp_path, args, code):
    env, cold = warm
    umask = os.umask(0o027)
    try:
        both = [facts(each, *args, cwd=tmp_path, stdin="some input") for each in (env, cold)]
    finally:
        os.umask(umask)
    made, usual = both
    assert (made.tensorflow, usual.tensorflow) == (True, False)  # the one forked warm, the other not
    assert made.pid != usual.pid
    assert made.seen == usual.seen  # argv, orig_argv, cwd, umask, sys.path, __main__, stdin, environment
    assert made.seen["umask"] == 0o027 and made.seen["cwd"] == str(tmp_path) and made.seen["stdin"] == "some input"
    assert made.done.returncode == usual.done.returncode == code
    assert made.done.stdout.splitlines()[1:] == usual.done.stdout.splitlines()[1:]
    assert made.done.stderr == usual.done.stderr
    assert made.done.stderr.endswith("atexit ran\n")


def test_a_pipeline_command_prints_the_same_warm(warm):
    env, cold = warm
    runs = [
        subprocess.run(
            [sys.executable, "-m", "pipeline", "devices", "--json"], env=each, capture_output=True, text=True, cwd=ROOT
        )
        for each in (env, cold)
    ]
    assert runs[0].returncode == runs[1].returncode == 0, runs[1].stderr
    assert (runs[0].stdout, runs[0].stderr) == (runs[1].stdout, runs[1].stderr)
    assert json.loads(runs[0].stdout)["replicas"] == 1


@pytest.mark.parametrize(
    "action,how,group",
    [("wait", "SIGTERM", False), ("wait", "SIGKILL", False), ("exec", "SIGTERM", False), ("spawn", "SIGTERM", True)],
)
def test_a_signal_to_the_client_reaches_the_forked_process(warm, tmp_path, action, how, group):
    """A signal is passed on (also to a process that has `exec`d), and the client then ends as
    the process did; a client that is killed takes the process with it; a signal to a client's
    own process group reaches the forked process's children too."""
    env, _ = warm
    pidfile = tmp_path / "pid"
    client = subprocess.Popen(
        [sys.executable, str(FACTS), action, str(pidfile)], env=env, stdout=subprocess.PIPE, start_new_session=group
    )
    pids = [int(pid) for pid in wait_for("the pids", lambda: pidfile.exists() and pidfile.read_text(), 60, 0.1).split()]
    assert client.pid not in pids
    if group:
        os.killpg(client.pid, getattr(signal, how))
    else:
        client.send_signal(getattr(signal, how))
    assert client.wait(timeout=30) == -getattr(signal, how)
    for pid in pids:
        wait_for(f"{pid}'s end", lambda pid=pid: not Path(f"/proc/{pid}").exists(), timeout=10, every=0.05)
    printed, _ = client.communicate()
    assert json.loads(printed.splitlines()[0])["tensorflow"]


def test_what_does_not_qualify_starts_as_usual(warm, tmp_path):
    """Verbose, another descriptor than 0, 1 and 2, another environment than the server's (it is
    only noted), fewer capabilities or CPUs than the session's, another interpreter's command
    line."""
    env, _ = warm
    assert not facts(env, "-v").tensorflow
    read, write = os.pipe()
    try:
        assert not facts(env, pass_fds=(write,)).tensorflow
    finally:
        os.close(read)
        os.close(write)
    assert not facts({**env, "TF_ENABLE_ONEDNN_OPTS": "0"}).tensorflow  # read when TensorFlow is imported
    assert facts({**env, "MLFLOW_TRACKING_URI": "sqlite:///x.db", "DVC_ROOT": "/x"}).tensorflow  # read later
    unprivileged = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"]  # root without its capabilities
    done = subprocess.run([*unprivileged, sys.executable, str(FACTS)], env=env, capture_output=True, text=True)
    assert not json.loads(done.stdout.splitlines()[0])["tensorflow"]
    pinned = subprocess.run(["taskset", "-c", "0", sys.executable, str(FACTS)], env=env, capture_output=True, text=True)
    assert not json.loads(pinned.stdout.splitlines()[0])["tensorflow"]
    probe = "import sys; print('tensorflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert done.stdout == "False\n"


def test_what_no_import_reads_is_the_same_environment(warm, tmp_path):
    """Variables of make, of an activated environment and of DVC's queue workers, and
    TensorFlow's thread counts, which its runtime reads when it starts, after the server's
    imports: in a warm start they take effect too."""
    env, _ = warm
    activated = {"VIRTUAL_ENV": sys.prefix, "VIRTUAL_ENV_PROMPT": "(.venv) "}
    made = facts({**env, "MAKEFLAGS": "-j2", "MAKELEVEL": "1", "_MP_FORK_LOGLEVEL_": "20", **activated}, cwd=tmp_path)
    assert made.tensorflow and made.seen == facts(env, cwd=tmp_path).seen
    few = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}
    runs = [facts({**env, **few}, "threads"), facts(env, "threads")]
    assert [run.tensorflow for run in runs] == [True, True]
    fewer, usual = (int(run.done.stdout.splitlines()[1]) for run in runs)
    assert fewer < usual, (fewer, usual)  # a normal start's are 2 fewer too (7 and 9 here)


def test_a_forked_process_has_the_sys_path_its_pythonpath_makes(warm, tmp_path):
    """PYTHONPATH is not part of an environment: a process forked warm gets the sys.path a normal
    start makes of it (none; a folder of helpers; one folder twice, once relative), unless a
    folder ahead of the interpreter's own holds a module that the server's imports looked for
    (`absl`, which TensorFlow imports) or a namespace folder by a name they did not find: then
    it starts as usual."""
    env, _ = warm
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "my_helpers.py").write_text("")
    without = {name: value for name, value in env.items() if name != "PYTHONPATH"}
    for pythonpath in ("", f"{tmp_path / 'helpers'}{os.pathsep}{ROOT}", f"{ROOT}{os.pathsep}..{os.sep}{ROOT.name}"):
        each = {**without, "PYTHONPATH": pythonpath} if pythonpath else without
        made, usual = facts(each, cwd=ROOT / "tests"), facts({**each, warm_client.VARIABLE: ""}, cwd=ROOT / "tests")
        assert (made.tensorflow, usual.tensorflow) == (True, False), pythonpath
        assert made.seen == usual.seen, pythonpath  # sys.path among them
    (tmp_path / "shadow" / "absl").mkdir(parents=True)
    (tmp_path / "shadow" / "absl" / "__init__.py").write_text("")
    assert not facts({**env, "PYTHONPATH": f"{tmp_path / 'shadow'}{os.pathsep}{ROOT}"}).tensorflow
    ((noted,),) = [list(Path(env[warm_client.VARIABLE]).glob(f"*.{warm_client.LOOKED_UP}"))]
    found, missing = json.loads(noted.read_text())
    assert "absl" in found and "pipeline" not in found + missing
    (tmp_path / "portion" / min(missing)).mkdir(parents=True)  # not a package: a namespace folder
    assert not facts({**env, "PYTHONPATH": f"{tmp_path / 'portion'}{os.pathsep}{ROOT}"}).tensorflow


def test_what_the_imports_set_is_the_environment_they_would_make_of_its_absence(warm):
    """What importing TensorFlow, Keras and MLflow sets in the environment (the server notes it),
    which the children of a process that imported them inherit: at those values, the server's
    environment; at another value, another one. And what no import reads."""
    env, _ = warm
    noted = json.loads((Path(env[warm_client.VARIABLE]) / warm_client.SET_BY_IMPORTS).read_text())
    # whether or not the environment the server started in had them (a worker whose tests
    # imported TensorFlow in-process passes them on)
    imports = {k: v for k, v in warm_client.IMPORT_DEFAULTS.items() if k not in warm_client.LOGGING}
    assert {k: v for k, v in noted.items() if k not in warm_client.LOGGING} == imports
    assert facts({**env, **warm_client.IMPORT_DEFAULTS}).tensorflow
    assert not facts({**env, "TF2_BEHAVIOR": "0"}).tensorflow  # only noted
    assert facts({**env, "PS1": "(.venv) ", "CELERY_LOG_LEVEL": "20"}).tensorflow  # a shell's, DVC's queue's


def test_which_commands_a_server_can_start(tmp_path, monkeypatch):
    python = sys.executable
    script = str(Path(python).parent / "pipeline")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    started = [
        warm_client.command([python, "-m", "pipeline", "-q", "train", "x"]) or {},
        warm_client.command([python, script, "evaluate"]) or {},
        warm_client.command([python, str(FACTS), "exit", "3"]) or {},
        warm_client.command([python, "-m", "pipeline.tuning.workers", "{}", "out.json"]) or {},
    ]
    assert [started[0].get("args"), started[1].get("script"), started[2].get("path0"), started[3].get("module")] == [
        ["-q", "train", "x"],
        script,
        str(FACTS.parent),
        "pipeline.tuning.workers",
    ]
    for other in (
        [python, "-m", "pipelines", "train"],  # another package
        [python, "-m", "pipeline.tuning.workers", "-v"],
        [python, "-m", "pipeline", "-v", "train"],  # verbose: set up otherwise before the imports
        [python, "-m", "pipeline", "--verbose", "train"],
        [python, "-u", "-m", "pipeline", "train"],  # an option of python's own
        [python, "-c", "import pipeline"],
        [python, str(ROOT / "benchmarks" / "memory.py")],  # not a worker of the suite
        [python],
    ):
        assert warm_client.command(other) is None, other
    (tmp_path / "sitecustomize.py").write_text("")  # code that runs before the command: a test's patch
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}:{tmp_path}")
    assert warm_client.command([python, "-m", "pipeline", "train"]) is None


def test_the_first_start_of_an_environment_is_noted_and_the_second_starts_its_server(tmp_path, monkeypatch):
    spawned = []
    monkeypatch.setattr(warm_client, "_spawn", lambda *args: spawned.append(args))
    for expected in ({"k.seen"}, {"k.seen", "k.started"}, {"k.seen", "k.started"}):
        warm_client._sighted(str(tmp_path), "k", "/project", "described")
        assert {p.name for p in tmp_path.iterdir()} == expected
    assert spawned == [(str(tmp_path), "k", "/project")]  # once: the third start waits for it
    assert (tmp_path / "k.seen").read_text() == "described"
