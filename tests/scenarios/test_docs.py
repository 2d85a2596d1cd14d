"""The docs site and the README that leads into it: `mkdocs build --strict` of mkdocs.yml, in
which a link to a page or an anchor that is not there fails the build; the README's links into
docs/; the README short enough to read top to bottom. tests/scenarios/test_readme.py runs the pages'
shell blocks."""

import re
import shutil
import subprocess
import sys

from support.processes import subprocess_env
from support.project import ROOT
from support.readme import README, docs_pages

README_LINES = 300


def build(project, site):
    """`mkdocs build --strict` of `project`'s mkdocs.yml into `site`: (exit code, its log)."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=project,
        env=subprocess_env(NO_MKDOCS_2_WARNING="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.returncode, result.stdout + result.stderr


def test_the_site_builds_with_no_broken_link_or_anchor(tmp_path):
    code, log = build(ROOT, tmp_path / "site")
    assert code == 0, log
    assert "WARNING" not in log, log
    for page in docs_pages():
        built = tmp_path / "site" / ("" if page.stem == "index" else page.stem) / "index.html"
        assert built.is_file(), f"{page.name} was not built"


def test_a_missing_anchor_a_file_outside_docs_and_a_page_left_out_fail_the_build(tmp_path):
    """mkdocs.yml's `validation` makes each of these a warning, which --strict fails on (MkDocs
    only reports most of them otherwise)."""
    project = tmp_path / "project"
    shutil.copytree(ROOT / "docs", project / "docs")
    shutil.copy(ROOT / "mkdocs.yml", project)
    with open(project / "docs" / "devices.md", "a") as page:
        page.write("\nSee [the loops](training-loops.md#no-such-heading) and [the CLI](../pipeline/cli.py).\n")
    (project / "docs" / "stray.md").write_text("# Not in the nav\n")
    code, log = build(project, tmp_path / "site")
    assert code == 1, log
    assert "does not contain an anchor '#no-such-heading'" in log
    assert "'../pipeline/cli.py', but the target is not found" in log
    assert "stray.md" in log


def readme_links() -> list[str]:
    text = re.sub(r"```.*?```", "", README.read_text(), flags=re.S)  # not in code blocks
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_the_readmes_links_into_docs_are_pages_of_the_site():
    """Relative, so that they work on GitHub; without an anchor, since GitHub and MkDocs make a
    heading's anchor differently."""
    links = [link for link in readme_links() if not link.startswith(("http://", "https://"))]
    assert any(link.startswith("docs/") for link in links)
    pages = {str(page.relative_to(ROOT)) for page in docs_pages()}
    for link in links:
        assert "#" not in link, f"README.md: {link}: link to the page; GitHub and MkDocs name anchors differently"
        assert (ROOT / link).is_file(), f"README.md links to {link}, which is not there"
        if link.endswith(".md"):
            assert link in pages, f"README.md links to {link}, which mkdocs.yml's nav leaves out"


def test_the_readme_is_short_enough_to_read_top_to_bottom():
    lines = len(README.read_text().splitlines())
    assert lines <= README_LINES, f"README.md has {lines} lines: move a topic to a page of docs/"
