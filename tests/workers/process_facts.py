"""What a process sees of its own start, as one JSON line on stdout; then what it was asked to
do (tests/repository/test_warm_start.py compares a warm start's with a normal one's).

python process_facts.py [exit CODE | raise | message TEXT | wait PIDFILE | ANYTHING]
"""

import atexit
import json
import os
import sys
import time

umask = os.umask(0)
os.umask(umask)
facts = {
    "argv": sys.argv,
    "orig_argv": sys.orig_argv,
    "cwd": os.getcwd(),
    "umask": umask,
    "path0": sys.path[0],
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
if action == "wait":
    with open(argument, "w", encoding="utf-8") as pidfile:
        pidfile.write(str(os.getpid()))
    time.sleep(120)
