"""README.md and the docs site's pages, run as a new user would: every ```bash and ```console
block, README.md's first and then each page's in the order of mkdocs.yml's nav, in one shell
session in a fresh copy of the project, checking exit codes and the lines a page says a command
prints. A block the session cannot run says why in the page (tests/readme.py has the
conventions).

The copy is of the session's trained project (tests/conftest.py: a clone whose `dvc repro` ran
on the fixture data, results committed), and its `.venv` is the suite's own, which `make setup`
made from the same lock: so the README's `make repro` finds both up to date instead of making
them a second time. The datasets are served from 127.0.0.1; no tracking server."""

import re
import subprocess
import time

import pytest

from helpers import GIT_IDENTITY, ROOT, subprocess_env
from readme import (DOCS, Session, console_steps, docs_pages, output_matches, pages, shell_blocks, strip_path,
                    untagged_prompts)

BLOCKS = shell_blocks()
RUN = [b for b in BLOCKS if b.skip_reason is None]
ARCHITECTURE = DOCS / "architecture.md"


def test_every_shell_block_is_run_or_says_why_not():
    assert sorted(DOCS.rglob("*.md")) == sorted(docs_pages()), \
        "a page of docs/ that mkdocs.yml's nav leaves out is neither on the site nor run by the session"
    assert any(b.page == "README.md" for b in BLOCKS) and any(b.page.startswith("docs/") for b in BLOCKS), \
        "no shell blocks in README.md or docs/: did pytest-codeblocks stop reading them?"
    for page in pages():
        assert untagged_prompts(page) == [], \
            f"{page.relative_to(ROOT)}: a block of `$ ` commands without ```console escapes the tests"
    for block in BLOCKS:
        reason = block.skip_reason
        if reason is None:
            continue
        assert len(reason) > 15, f"{block.where}: a block not run needs its reason"
        # a block run by another test names it, and that test exists
        for path, name in re.findall(r"(tests/test_\w+\.py)::(\w+)", reason):
            assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M), \
                f"{block.where}: {path}::{name} does not exist"


def test_console_output_matching():
    """The matcher the session uses: wildcards, and numbers that may vary."""
    assert output_matches(["error: a: ...", "..."], "error: a: b c\nmore\nlines\n")
    assert not output_matches(["error: a"], "error: a\nextra\n")
    assert output_matches(["x  1,107  0.22"], "x 985 0.31\n", numbers_vary=True)
    assert not output_matches(["x  1,107  0.22"], "y 985 0.31\n", numbers_vary=True)


@pytest.fixture(scope="module")
def session(tmp_path_factory, dataset_files, trained_project):
    from fixtures import FileServer

    home = tmp_path_factory.mktemp("readme")
    project = trained_project.copy(home / "pipeline")
    (project / ".venv").symlink_to(ROOT / ".venv")
    env = subprocess_env(**GIT_IDENTITY)
    # a user's own shell: not the test's settings, nor those of a `make test` the suite runs under
    # (a make inside one prints "Entering directory" lines around what the README shows)
    for name in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "VIRTUAL_ENV", "MAKELEVEL", "MAKEFLAGS", "MFLAGS"):
        env.pop(name, None)
    env["PATH"] = strip_path(env, ROOT / ".venv")  # on PATH once the README activates it
    with FileServer(dataset_files) as server:
        env["PIPELINE_DATA_MIRROR"] = server.url
        yield Session(project, env, home)


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("block", RUN, ids=[f"{b.page}:line{b.lineno}" for b in RUN])
def test_readme_block(session, block):
    started = time.time()
    if block.syntax == "console":
        steps = console_steps(block.code)
        results = session.run_console(steps)
        assert len(results) == len(steps), f"{block.where}: the session stopped early"
        for k, ((command, expected), (code, output)) in enumerate(zip(steps, results)):
            shows_code = k + 1 < len(steps) and steps[k + 1][0].strip() == "echo $?"
            assert code == 0 or shows_code, (
                f"{block.where}: `{command}` exited {code}:\n{output[-3000:]}")
            assert "Traceback" not in output, f"{block.where}: `{command}`:\n{output[-3000:]}"
            assert output_matches(expected, output, block.numbers_vary), (
                f"{block.where}: `{command}` printed\n{output}\nwhere {block.page} shows\n"
                + "\n".join(expected))
    else:
        code, output = session.run(block.code)
        assert code == 0, f"{block.where}: the block exited {code}:\n{output[-5000:]}"
        assert "Traceback" not in output, f"{block.where}:\n{output[-5000:]}"
    print(f"{block.where}: {time.time() - started:.1f} s")


def layout_entries() -> set[str]:
    """The paths docs/architecture.md's Layout names (folders end with /)."""
    text = ARCHITECTURE.read_text()
    block = text.split("## Layout", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    looks_like_path = re.compile(r"^[\w.-]+(/[\w.-]*)*$")
    parents: list[tuple[int, str]] = []
    paths = set()
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        if not line.strip() or indent > 6:  # a description's second line
            continue
        names = []
        for token in line.split():
            name = token.rstrip(",")
            if not (looks_like_path.match(name) and ("." in name or name.endswith("/") or name == "Makefile")):
                break
            names.append(name)
            if not token.endswith(","):  # "a.py, b.py" names two; "a.py b.py ..." one and a description
                break
        assert names, f"Layout line names no path: {line!r}"
        parents = [(i, p) for i, p in parents if i < indent]
        prefix = parents[-1][1] if parents else ""
        for name in names:
            paths.add(prefix + name)
            if name.endswith("/") and len(names) == 1:
                parents.append((indent, prefix + name))
    return paths


def test_layout_names_every_part_of_the_tree_and_nothing_else():
    listed = layout_entries()
    missing = sorted(p for p in listed if not (ROOT / p).exists())
    assert missing == [], f"docs/architecture.md's Layout names what does not exist: {missing}"
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    tracked = [t for t in tracked if (ROOT / t).exists()]
    top = {t.split("/")[0] + ("/" if "/" in t else "") for t in tracked}
    top -= {"README.md", ".dockerignore", ".dvcignore", ".gitattributes", ".gitignore"}
    assert sorted(top - {p.split("/")[0] + ("/" if "/" in p else "") for p in listed}) == [], \
        "a top-level part of the repository is missing from docs/architecture.md's Layout"
    modules = {t for t in tracked if t.split("/")[0] in ("pipeline", "stages", "scripts") and not t.endswith(".md")}
    assert sorted(modules - listed) == [], "docs/architecture.md's Layout leaves these files out"


def test_the_tests_mirror_the_package():
    """docs/architecture.md: a test module for every module of pipeline/ (tests/test_<name>.py,
    whichever subpackage the module is in); a package's __init__.py and __main__.py are not
    modules of their own."""
    modules = [p for p in (ROOT / "pipeline").rglob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(modules) > 30, "pipeline/ has lost its modules: is ROOT the repository?"
    untested = sorted(str(p.relative_to(ROOT)) for p in modules if not (ROOT / "tests" / f"test_{p.stem}.py").is_file())
    assert untested == [], "a module of pipeline/ without its tests/test_<module>.py"
    names = [p.stem for p in modules]
    assert sorted({n for n in names if names.count(n) > 1}) == [], "two modules whose tests would share a name"
