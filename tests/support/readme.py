"""The shell blocks of README.md and of the docs site's pages, read with pytest-codeblocks, and a
shell session to run them in.

The pages are README.md, then docs/ in the order of mkdocs.yml's nav: a page goes on from the
README's set-up (the project cloned, `make repro`, .venv activated) and from the pages before
it. Conventions in every page (HTML comments, invisible on GitHub and on the site):
- a ```bash block is run as it stands, in that order, in one session: what `cd`,
  `source` and `export` do carries over to the next block; every command must succeed;
- a ```console block is `$ command` lines, each followed by the output it prints (stdout and
  stderr together); `...` alone on a line stands for any lines, `...` inside a line for any
  text; `$ echo $?` shows the exit code of the command before it. A command that fails must
  be followed by `$ echo $?`;
- `<!--pytest.mark.numbers_vary-->` before a console block: numbers (and the spaces that align
  them) may differ from the ones shown;
- `<!--pytest.mark.skip(reason="...")-->` before a block: not run by the session, and why (a
  GPU, a server that runs until stopped, a benchmark, or the test that runs it instead).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml
from pytest_codeblocks import extract_from_file

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
SHELLS = ("bash", "sh", "console", "shell")


def docs_pages() -> list[Path]:
    """The site's pages in the order of mkdocs.yml's nav (sections flattened)."""

    def walk(entries):
        for entry in entries:
            target = next(iter(entry.values())) if isinstance(entry, dict) else entry
            if isinstance(target, list):
                yield from walk(target)
            elif "://" not in target:  # a link to another site is no page
                yield DOCS / target

    return list(walk(yaml.safe_load(MKDOCS.read_text())["nav"]))


def pages() -> list[Path]:
    """README.md, then the site's pages: the order the session runs their blocks in."""
    return [README, *docs_pages()]


@dataclass
class Block:
    page: str  # the page's path in the repository: README.md, docs/devices.md
    syntax: str
    code: str
    lineno: int
    marks: list[str]

    @property
    def where(self) -> str:
        return f"{self.page}:{self.lineno}"

    @property
    def skip_reason(self) -> str | None:
        for mark in self.marks:
            m = re.fullmatch(r'pytest\.mark\.skip\(reason=(["\'])(.*)\1\)', mark.strip(), re.S)
            if m:
                return m.group(2)
        return None

    @property
    def numbers_vary(self) -> bool:
        return any(mark.strip() == "pytest.mark.numbers_vary" for mark in self.marks)


def shell_blocks(path: Path | None = None) -> list[Block]:
    """Every fenced block that a user would paste into a shell: of the page `path`, or of every
    page in the session's order."""
    return [
        Block(str(page.relative_to(ROOT)), b.syntax or "", b.code, b.lineno, list(b.marks))
        for page in ([path] if path else pages())
        for b in extract_from_file(page)
        if (b.syntax or "") in SHELLS
    ]


def untagged_prompts(path: Path) -> list[int]:
    """Line numbers of fenced blocks with no language that start with a `$ ` prompt (a shell
    session that would escape the tests)."""
    return [b.lineno for b in extract_from_file(path) if not b.syntax and b.code.lstrip().startswith("$ ")]


def console_steps(code: str) -> list[tuple[str, list[str]]]:
    """[(command, expected output lines)] of a console block; `\\` continues a command."""
    steps: list[tuple[str, list[str]]] = []
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            if not steps:
                raise ValueError(f"console block: output before any command: {line!r}")
            steps[-1][1].append(line.rstrip())
            i += 1
            continue
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command + "\n" + lines[i]
        steps.append((command, []))
        i += 1
    return steps


def _normalise(text: str, numbers_vary: bool) -> str:
    if numbers_vary:
        text = re.sub(r"\d[\d,.]*", "N", text)
        text = re.sub(r"[ \t]+", " ", text)
    return text


def output_matches(expected: list[str], actual: str, numbers_vary: bool = False) -> bool:
    """Whether `actual` is what `expected` shows (with its `...` wildcards)."""
    actual = "".join(_normalise(line.rstrip(), numbers_vary) + "\n" for line in actual.splitlines())
    pattern = ""
    for line in expected:
        if line.strip() == "...":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            parts = _normalise(line, numbers_vary).split("...")
            pattern += "[^\n]*".join(re.escape(part) for part in parts) + "\n"
    return re.fullmatch(pattern, actual) is not None


class Session:
    """A bash session that survives between blocks: each block runs in a fresh bash that first
    restores the exported variables and working folder the previous block left."""

    def __init__(self, cwd: Path, env: dict, state_dir: Path):
        self.env = env
        self.state = state_dir / "session.sh"
        self.state.write_text(f"cd {shlex.quote(str(cwd))}\n")

    def _script(self, body: str, errexit: bool) -> str:
        state = shlex.quote(str(self.state))
        return (
            f"source {state} 2>/dev/null\n"
            f"__save() {{ declare -px > {state}.new 2>/dev/null; printf 'cd %q\\n' \"$PWD\" >> {state}.new; "
            f"mv {state}.new {state}; }}\n"
            "trap '__rc=$?; __save; exit $__rc' EXIT\n"
            "exec 2>&1\n" + ("set -eo pipefail\n" if errexit else "") + body + "\n"
        )

    def run(self, body: str, errexit: bool = True, timeout: float = 1800) -> tuple[int, str]:
        proc = subprocess.run(
            ["bash", "-c", self._script(body, errexit)],
            env=self.env,
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
        )
        return proc.returncode, proc.stdout

    def run_console(self, steps: list[tuple[str, list[str]]], timeout: float = 1800) -> list[tuple[int, str]]:
        """Each command's (exit code, output)."""
        marker = "@@readme-step@@"
        body = "__last=0\n"
        for command, _ in steps:
            body += f"echo {marker}$__last; (exit $__last); {command}\n__last=$?\n"
        body += f"echo {marker}$__last\n"
        _, out = self.run(body, errexit=False, timeout=timeout)
        parts = out.split(marker)
        results = []
        for k in range(1, len(parts) - 1):
            # parts[k + 1] starts with the exit code of command k
            code_text, _, _ = parts[k + 1].partition("\n")
            output = parts[k].partition("\n")[2]
            results.append((int(code_text), output))
        return results


def strip_path(env: dict, folder: Path) -> str:
    """PATH without any entry inside `folder` (the test's own virtual environment)."""
    return os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and not Path(p).resolve().is_relative_to(folder)
    )
