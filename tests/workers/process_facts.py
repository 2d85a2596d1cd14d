"""What a process sees of its own start, as one JSON line on stdout; then what it was asked to
do (tests/repository/test_warm_start.py compares a warm start's with a normal one's).

python process_facts.py [exit CODE | raise | message TEXT | wait PIDFILE | exec PIDFILE |
                         spawn PIDFILE | threads | ANYTHING]

wait: writes its pid and sleeps; exec: writes its pid and becomes `sleep`; spawn: starts
`sleep`, writes its pid and the sleep's, and waits for it; threads: runs a TensorFlow op and prints
how many threads the process then has.
"""

import atexit
import json
import os
import subprocess
import sys
import time

umask = os.umask(0)
os.umask(umask)
facts = {
    "argv": sys.argv,
    "orig_argv": sys.orig_argv,
    "cwd": os.getcwd(),
    "umask": umask,
    "path": sys.path,
    "name": __name__,
    "stdin": sys.stdin.read(),
    "variable": os.environ.get("FACTS_VARIABLE"),
    "tensorflow": "tensorflow" in sys.modules,  # a warm start's is there before the first line
    "pid": os.getpid(),
}
print(json.dumps(facts), flush=True)
atexit.register(print, "atexit ran", file=sys.stderr)
action, argument = (sys.argv[1:] + ["", ""])[:2]
if action == "exit":
    sys.exit(int(argument))
if action == "raise":
    raise ValueError("raised on purpose")
if action == "message":
    sys.exit(argument)
if action == "threads":  # TensorFlow's runtime started: how many threads the process then has
    import tensorflow as tf

    tf.linalg.matmul(tf.ones((64, 64)), tf.ones((64, 64))).numpy()
    print(len(os.listdir("/proc/self/task")))
if action in ("wait", "exec", "spawn"):
    sleeping = subprocess.Popen(["sleep", "120"]) if action == "spawn" else None
    with open(argument, "w", encoding="utf-8") as pidfile:
        pidfile.write(" ".join(str(pid) for pid in (os.getpid(), sleeping and sleeping.pid) if pid))
    if action == "exec":
        sys.stdout.flush()
        os.execvp("sleep", ["sleep", "120"])
    sleeping.wait() if sleeping else time.sleep(120)
