"""The base image's Python packages against docker/ngc-base.txt, the list docker/ngc.lock was
resolved against: one `error:` line and exit 1 when they differ (another base, or a base
retagged since), so that a build installs the lock's versions or stops.

    python3 check-base.py ngc-base.txt   (in the base, before anything is installed)
"""

import re
import subprocess
import sys


def pins(lines):
    """{normalised name: version} of `name==version` lines; pip's own tools left out."""
    found = {}
    for line in lines:
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)", line.strip())
        if m:
            name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
            if name not in ("pip", "setuptools", "wheel"):
                found[name] = m.group(2)
    return found


listed_file = sys.argv[1]
with open(listed_file) as handle:
    listed = pins(handle)
installed = pins(subprocess.run([sys.executable, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                                capture_output=True, text=True, check=True).stdout.splitlines())
differs = [f"{name} {listed.get(name, 'absent')} in the list, {installed.get(name, 'absent')} here"
           for name in sorted(set(listed) | set(installed)) if listed.get(name) != installed.get(name)]
if differs:
    print(f"error: the base image's Python packages are not the ones {listed_file} lists, which the lock was "
          f"made against ({'; '.join(differs[:5])}{'; ...' if len(differs) > 5 else ''}): write the list from "
          "this base (scripts/base-packages.sh IMAGE > docker/ngc-base.txt), run `make lock`, and build again",
          file=sys.stderr)
    sys.exit(1)
