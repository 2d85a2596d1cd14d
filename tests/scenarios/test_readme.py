"""README.md and the docs site's pages, run as a new user would: every ```bash and ```console
block, README.md's first and then each page's in the order of mkdocs.yml's nav, in one shell
session in a fresh copy of the project, checking exit codes and the lines a page says a command
prints. A block the session cannot run says why in the page (tests/support/readme.py has the
conventions).

The copy is of the session's trained project (tests/conftest.py: a clone whose `dvc repro` ran
on the fixture data, results committed), and its `.venv` is the suite's own, which `make setup`
made from the same lock: so the README's `make repro` finds both up to date instead of making
them a second time. The datasets are served from 127.0.0.1; no tracking server."""

import re
import time

import pytest
from support.processes import GIT_IDENTITY, subprocess_env
from support.project import ROOT
from support.readme import (
    DOCS,
    Session,
    console_steps,
    docs_pages,
    output_matches,
    pages,
    shell_blocks,
    strip_path,
    untagged_prompts,
)

BLOCKS = shell_blocks()
RUN = [b for b in BLOCKS if b.skip_reason is None]


def test_every_shell_block_is_run_or_says_why_not():
    assert sorted(DOCS.rglob("*.md")) == sorted(docs_pages()), (
        "a page of docs/ that mkdocs.yml's nav leaves out is neither on the site nor run by the session"
    )
    assert any(b.page == "README.md" for b in BLOCKS) and any(b.page.startswith("docs/") for b in BLOCKS), (
        "no shell blocks in README.md or docs/: did pytest-codeblocks stop reading them?"
    )
    for page in pages():
        assert untagged_prompts(page) == [], (
            f"{page.relative_to(ROOT)}: a block of `$ ` commands without ```console escapes the tests"
        )
    for block in BLOCKS:
        reason = block.skip_reason
        if reason is None:
            continue
        assert len(reason) > 15, f"{block.where}: a block not run needs its reason"
        # a block run by another test names it, and that test exists
        for path, name in re.findall(r"(tests/(?:\w+/)?test_\w+\.py)::(\w+)", reason):
            assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M), (
                f"{block.where}: {path}::{name} does not exist"
            )


def test_console_output_matching():
    """The matcher the session uses: wildcards, and numbers that may vary."""
    assert output_matches(["error: a: ...", "..."], "error: a: b c\nmore\nlines\n")
    assert not output_matches(["error: a"], "error: a\nextra\n")
    assert output_matches(["x  1,107  0.22"], "x 985 0.31\n", numbers_vary=True)
    assert not output_matches(["x  1,107  0.22"], "y 985 0.31\n", numbers_vary=True)


@pytest.fixture(scope="module")
def session(tmp_path_factory, dataset_files, trained_project):
    from support.datasets import FileServer

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
            assert code == 0 or shows_code, f"{block.where}: `{command}` exited {code}:\n{output[-3000:]}"
            assert "Traceback" not in output, f"{block.where}: `{command}`:\n{output[-3000:]}"
            assert output_matches(expected, output, block.numbers_vary), (
                f"{block.where}: `{command}` printed\n{output}\nwhere {block.page} shows\n" + "\n".join(expected)
            )
    else:
        code, output = session.run(block.code)
        assert code == 0, f"{block.where}: the block exited {code}:\n{output[-5000:]}"
        assert "Traceback" not in output, f"{block.where}:\n{output[-5000:]}"
    print(f"{block.where}: {time.time() - started:.1f} s")
