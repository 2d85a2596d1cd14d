"""The lock docker/Dockerfile installs, chosen against the base image's own Python packages.

    python3 check-base.py DIR BASE_IMAGE   (in the base, as root, before anything is installed)

DIR holds ngc-base.txt, ngc.lock and pyproject.toml as committed. When the base's packages are
the ones ngc-base.txt lists (pip, setuptools and wheel aside), ngc.lock is the lock and nothing
changes. When they are not (NVIDIA's real image while the list is the stand-in's, a later tag, a
site's own derivative), this resolves pyproject.toml's dependencies and extras (all but `test`)
against the base's installed versions, with uv at a pinned version whose wheel pip checks
against the hashes below, and writes what the project adds, with the sha256 hashes of the
resolution and none of the base's packages, over DIR/ngc.lock; and the base's list over
DIR/ngc-base.txt, so that `scripts/base-packages.sh --pin IMAGE` can write both into a clone
and the next build on that base is strict. One line says which way it went; a failure is one
`error:` line and exit 1, with DIR as it was.
"""

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import tomllib
except ImportError:  # Python 3.10: the TOML reader pip carries
    from pip._vendor import tomli as tomllib

# uv 0.13.9 (the project's own: Makefile's) and the sha256 of each of its wheels on PyPI
UV = """uv==0.13.9 \\
    --hash=sha256:16963d19594e18d746a70c7fce82237bde4f2cac4cfcf0ca2b84796fe9d0c6e9 \\
    --hash=sha256:2c45530751517d6c3bbc69a19473f6effe47cce047bede01ffd8af7ea7b36b25 \\
    --hash=sha256:3eeeb51a267a2144640fcd8f38d4a2f63439b39bc47445fd84727c3fc462c843 \\
    --hash=sha256:5435c5ce14a56431208ca0996416d310f1598e8c2c8ba707688985a16bb82dbe \\
    --hash=sha256:56ec37616c00220032fc7b8c9d0ef51367fd0d70d9cd6ddd841660f949f84fed \\
    --hash=sha256:66c512266d633bef48384a1f53003f41f2a8e7b36fe6e7fbfd3e0fd52d96fa63 \\
    --hash=sha256:6a44b2ed8111d2f60d2b92627c5dccda3f7ed7570b18ce115e569cd68c28246b \\
    --hash=sha256:6b0c7b9f47a5d011939d61e324d3fe18a8bc155d8dd53add738709a92f290a7c \\
    --hash=sha256:6d5114bba238adddacb32fb11904f2b3ff4e988f8e9ff0d8d3b5e9822cf836b8 \\
    --hash=sha256:7ec1e1dd9b6cb335c301afdf877989df384227313981850755a59561f75e4ab8 \\
    --hash=sha256:a2ee66fe8b6608e1482ab1bde5799da04705c1cb40324c7f66054ecf46ae6e40 \\
    --hash=sha256:a6e845f387e4ed55bb59342957a9179e24a631fcc7668bda3426ae1cef8ed4b9 \\
    --hash=sha256:c16ed11e013557536b3e60065f1b912f6407bd6518e041b961e23ef9e6b4fbf5 \\
    --hash=sha256:c5dbdb7c8737cd183a9dce95b39cfd1f3d54ec2a27a1bb58f160293f9ba2c805 \\
    --hash=sha256:d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19 \\
    --hash=sha256:db5c8df7145c21ffea9c0f74e38823bac3af60cbadf0e26b8633f08627b17bab \\
    --hash=sha256:dd6f4f93ddf8a668c73f0945f3638444b2140a4e15a3912067493fc6335543e4 \\
    --hash=sha256:ecb6028d79dc96fbeafffe5c8af62a7099487ebc05a701e76714eebcffd06375 \\
    --hash=sha256:eeb92051c2123b9730c46b04cc843cfa4bc7d7b0aec56df431a2215ef4cb0273
"""
PIP_TOOLS = ("pip", "setuptools", "wheel")


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lines) -> dict[str, str]:
    """{normalised name: version} of `name==version` lines."""
    found = {}
    for line in lines:
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)", line.strip())
        if m:
            found[normalise(m.group(1))] = m.group(2)
    return found


def reason(text: str) -> str:
    """A tool's error output as one line: uv's tree of reasons (`x ...`, `+-> ...`) joined."""
    lines = [re.sub(r"^[\s\u00d7\u2570\u2500\u25b6\u2502\u251c:]+", "", line).strip() for line in text.splitlines()]
    lines = [
        re.sub(r"^(error|cause|caused by):\s*", "", line, flags=re.I)
        for line in lines
        if line and not line.startswith(("hint:", "help:", "warning:"))
    ]
    return "; ".join(line.rstrip(":") for line in lines[-6:]) if lines else "no output"


def run(args, what: str, env=None) -> subprocess.CompletedProcess:
    try:
        out = subprocess.run(args, capture_output=True, text=True, env=env)
    except OSError as exc:
        fail(f"{what}: {exc}")
    if out.returncode != 0:
        fail(f"{what}: {reason(out.stderr or out.stdout)}")
    return out


def resolve(folder: str, base: dict[str, str], work: str, image: str) -> str:
    """What the project adds to `base`, as a hashed lock's text."""
    project = os.path.join(folder, "pyproject.toml")
    try:
        with open(project, "rb") as handle:
            extras = [
                name
                for name in tomllib.load(handle).get("project", {}).get("optional-dependencies", {})
                if name != "test"
            ]
    except (OSError, ValueError) as exc:
        fail(f"cannot read {project}: {getattr(exc, 'strerror', None) or exc}")
    # NVIDIA's own builds carry a local version (tensorflow 2.17.0+nv25.2): PyPI's release of the
    # same version stands for it while resolving, as in scripts/container-locks.sh
    constraints = os.path.join(work, "base-constraints.txt")
    with open(constraints, "w") as handle:
        handle.writelines(f"{name}=={re.sub(r'[+].*$', '', version)}\n" for name, version in sorted(base.items()))
    requirement = os.path.join(work, "uv.txt")
    with open(requirement, "w") as handle:
        handle.write(UV)
    tool = os.path.join(work, "uv")
    run([sys.executable, "-m", "venv", tool], f"cannot make a virtual environment for uv in {tool}")
    run(
        [
            os.path.join(tool, "bin", "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--require-hashes",
            "--no-deps",
            "-r",
            requirement,
        ],
        "cannot install uv 0.13.9 with its hashes from the package index",
    )
    env = {**os.environ, "UV_CACHE_DIR": os.path.join(work, "cache"), "UV_NO_CONFIG": "1", "UV_SYSTEM_CERTS": "1"}
    if os.environ.get("PIP_CERT"):  # the CA bundle pip is told to trust (a TLS-inspecting proxy's)
        env["SSL_CERT_FILE"] = os.environ["PIP_CERT"]
    if os.environ.get("PIP_INDEX_URL"):  # the site's index, as pip would use it
        env["UV_DEFAULT_INDEX"] = os.environ["PIP_INDEX_URL"]
    output = os.path.join(work, "ngc.lock")
    run(
        [
            os.path.join(tool, "bin", "uv"),
            "pip",
            "compile",
            os.path.join(folder, "pyproject.toml"),
            *[f"--extra={name}" for name in extras],
            "--constraint",
            constraints,
            *[f"--no-emit-package={name}" for name in sorted(base)],
            "--generate-hashes",
            "--python",
            sys.executable,
            "--quiet",
            "--custom-compile-command",
            f"docker/check-base.py, in docker/Dockerfile's build on {image}",
            "--output-file",
            output,
        ],
        "cannot resolve pyproject.toml's dependencies against the base's installed packages",
        env=env,
    )
    with open(output) as handle:
        return handle.read()


def base_list(base: dict[str, str], image: str) -> str:
    """The base's packages as docker/ngc-base.txt keeps them (scripts/base-packages.sh's form)."""
    return (
        f"# The Python packages of the project image's base, {image} (Python {platform.python_version()}),\n"
        "# as `pip list --format=freeze` printed them in docker/Dockerfile's build, but pip, setuptools\n"
        "# and wheel: docker/ngc.lock was resolved against them. Written by docker/check-base.py; in a\n"
        "# clone by `scripts/base-packages.sh --pin IMAGE`, after which a build on this base is strict.\n"
        + "".join(f"{name}=={version}\n" for name, version in sorted(base.items()))
    )


def main() -> None:
    if len(sys.argv) != 3:
        print("usage: check-base.py DIR BASE_IMAGE", file=sys.stderr)
        sys.exit(2)
    folder, image = sys.argv[1], sys.argv[2]
    listed_file = os.path.join(folder, "ngc-base.txt")
    try:
        with open(listed_file) as handle:
            template = handle.read()
    except OSError as exc:
        fail(f"cannot read {listed_file}: {exc.strerror}")
    listed = {name: v for name, v in pins(template.splitlines()).items() if name not in PIP_TOOLS}
    freeze = run(
        [sys.executable, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        f"cannot list the Python packages of the base {image}",
    ).stdout.splitlines()
    everything = {name: v for name, v in pins(freeze).items() if name != "pip"}
    base = {name: v for name, v in everything.items() if name not in PIP_TOOLS}
    if base == listed:
        print(f"base {image}: its Python packages are docker/ngc-base.txt's; installing docker/ngc.lock as locked")
        return
    # versions that differ first, then what only the base has, then what only the list has
    differs = [
        f"{name} {listed.get(name, 'absent')} in the list, {base.get(name, 'absent')} here"
        for name in sorted(set(listed) | set(base), key=lambda n: (n not in listed, n not in base, n))
        if listed.get(name) != base.get(name)
    ]
    work = tempfile.mkdtemp(prefix="pipeline-resolve-")
    try:
        # setuptools and wheel too, when the base has them: nothing of the base is replaced
        lock = resolve(folder, everything, work, image)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    added = {normalise(name) for name in re.findall(r"^([A-Za-z0-9._-]+)==", lock, re.M)}
    replaced = sorted(set(added) & set(everything))
    if replaced:
        fail(f"the lock resolved on the base {image} would replace its {', '.join(replaced)}")
    for name, text in (("ngc.lock", lock), ("ngc-base.txt", base_list(base, image))):
        with open(os.path.join(folder, name + ".part"), "w") as handle:
            handle.write(text)
    for name in ("ngc.lock", "ngc-base.txt"):
        os.replace(os.path.join(folder, name + ".part"), os.path.join(folder, name))
    digest = hashlib.sha256(lock.encode()).hexdigest()
    print(
        f"base {image}: its Python packages are not docker/ngc-base.txt's ({len(differs)} differ: "
        f"{'; '.join(differs[:3])}{f'; {len(differs) - 3} more' if len(differs) > 3 else ''}), "
        "so what the project adds was resolved "
        f"against them: {len(added)} packages, installed with the hashes of {folder}/ngc.lock "
        f"(sha256:{digest}); `scripts/base-packages.sh --pin IMAGE` writes that lock and the base's list "
        "into the clone, and the next build on this base is strict"
    )


if __name__ == "__main__":
    main()
