"""The repository's shape as docs/architecture.md draws it: its Layout names every part of the
tree; the tests mirror the package; the import graph of pipeline/ and stages/ has no cycle and no
import from a lower layer back up to a higher one (the layers are docs/architecture.md's)."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from collections import Counter
from pathlib import Path

from support.project import ROOT

ARCHITECTURE = ROOT / "docs" / "architecture.md"


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
    tracked = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    tracked = [t for t in tracked if (ROOT / t).exists()]
    top = {t.split("/")[0] + ("/" if "/" in t else "") for t in tracked}
    top -= {"README.md", ".dockerignore", ".dvcignore", ".gitattributes", ".gitignore"}
    assert sorted(top - {p.split("/")[0] + ("/" if "/" in p else "") for p in listed}) == [], (
        "a top-level part of the repository is missing from docs/architecture.md's Layout"
    )
    modules = {t for t in tracked if t.split("/")[0] in ("pipeline", "stages", "scripts") and not t.endswith(".md")}
    assert sorted(modules - listed) == [], "docs/architecture.md's Layout leaves these files out"


def test_the_tests_mirror_the_package():
    """The unit tests of pipeline/<wing>/<module>.py are tests/<wing>/test_<module>.py (a root
    module's, tests/test_<module>.py), a stage's (stages/<stage>.py) tests/stages/test_<stage>.py,
    and every test module of a wing's folder is a module's; the whole-system scenarios are in
    tests/scenarios/, the checks of the repository's own files in tests/repository/. A package's
    __init__.py (its docstring), __main__.py and stages/_common.py (the stages' shared options)
    are not modules of their own. Beside them: the helpers (support/), the runner (runner/), the
    worker scripts (workers/) and the container stand-ins (container/). The one exception, the
    commands' wing: pipeline/commands/<name>.py is named for its command, which is named for what
    its library module does (tools/bench.py, tracking/compare.py, ...), so its tests are
    tests/commands/test_<name>_command.py, as its click function is `<name>_command`: two test
    modules of one name cannot both be imported (test_no_two_test_modules_share_a_name)."""
    modules = [
        p.relative_to(ROOT / "pipeline")
        for p in (ROOT / "pipeline").rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    ]
    assert len(modules) > 30, "pipeline/ has lost its modules: is ROOT the repository?"
    expected = {mirror_of(m) for m in modules}
    stages = [p for p in (ROOT / "stages").glob("*.py") if not p.name.startswith("_")]
    assert len(stages) == 4, "stages/ has lost its stages: is ROOT the repository?"
    expected |= {Path("tests", "stages", f"test_{p.name}") for p in stages}
    untested = sorted(str(t) for t in expected if not (ROOT / t).is_file())
    assert untested == [], "a module of pipeline/ or a stage without its test module"
    found = {p.relative_to(ROOT) for p in (ROOT / "tests").rglob("test_*.py")}
    orphans = sorted(str(t) for t in found - expected if t.parts[1] not in ("scenarios", "repository"))
    assert orphans == [], "a test module in tests/ or a wing's folder that no module of pipeline/ has"
    wings = {m.parts[0] for m in modules if len(m.parts) > 1}
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert sorted(folders - wings) == ["container", "repository", "runner", "scenarios", "stages", "support", "workers"]


def mirror_of(module: Path) -> Path:
    """The test module of `module` (a path under pipeline/)."""
    if module.parts[0] == "commands":
        return Path("tests", "commands", f"test_{module.stem}_command.py")
    return Path("tests", *module.parent.parts, f"test_{module.name}")


def test_no_two_test_modules_share_a_name():
    """pytest imports each test module by its file's name (no __init__.py in tests/): two of the
    same name in two folders stop the run with "import file mismatch". A module of pipeline/ is
    named apart from every other's for the same reason (its tests mirror it)."""
    names = Counter(p.name for p in (ROOT / "tests").rglob("test_*.py"))
    assert sorted(name for name, n in names.items() if n > 1) == []


def test_no_support_module_of_the_tests_is_over_300_lines():
    """What the tests share (the helpers, the runner, conftest's fixtures, the worker scripts) is
    split by topic: a module that grows past 300 lines holds two topics."""
    support = [p for p in (ROOT / "tests").rglob("*.py") if not p.name.startswith("test_")]
    assert len(support) > 15, "tests/ has lost its support modules: is ROOT the repository?"
    long = {str(p.relative_to(ROOT)): n for p in support if (n := len(p.read_text().splitlines())) > 300}
    assert long == {}


def test_conftest_holds_fixtures_and_the_runner_is_a_plugin():
    """tests/conftest.py defines fixtures (and their own helpers), and one hook: the one that
    stops what its session fixtures shared between xdist's workers. The suite's runner, every
    other hook, is the plugin tests/runner/plugin.py, which conftest.py loads."""
    tree = ast.parse((ROOT / "tests" / "conftest.py").read_text())
    hooks = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("pytest_")]
    assert hooks == ["pytest_sessionfinish"]
    loaded = [n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "pytest_plugins"]
    assert [ast.literal_eval(n.value) for n in loaded] == [("runner.plugin",)]
    plugin = ast.parse((ROOT / "tests" / "runner" / "plugin.py").read_text())
    assert len([n for n in plugin.body if isinstance(n, ast.FunctionDef) and n.name.startswith("pytest_")]) >= 8


# --------------------------------------------------------------------------- the import graph

# Low to high: a module imports its own wing and the ones below it, never one above. The root's
# errors, log and io are the floor; the command line (cli, the commands, options) and the stages
# the roof.
LAYERS = (
    ("pipeline.errors", "pipeline.log", "pipeline.io", "pipeline.fields", "pipeline"),
    ("pipeline.runtime",),
    ("pipeline.kinds",),
    ("pipeline.data",),
    ("pipeline.config",),
    ("pipeline.tracking",),
    ("pipeline.training",),
    ("pipeline.serving",),
    ("pipeline.tuning",),
    ("pipeline.tools",),
    ("pipeline.cli", "pipeline.commands", "pipeline.options", "pipeline.__main__", "stages"),
)


def module_files() -> dict[str, Path]:
    found = {}
    for path in sorted([*(ROOT / "pipeline").rglob("*.py"), *(ROOT / "stages").glob("*.py")]):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project's modules that `name` imports, at its top and inside its functions alike
    (an import in a function is still an edge), but for those only a type checker reads."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _type_checking(node):
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def layer_of(name: str) -> int:
    """The layer of the longest prefix of LAYERS that names `name` or its package."""
    found = [
        (len(p), depth)
        for depth, prefixes in enumerate(LAYERS)
        for p in prefixes
        if name == p or name.startswith(p + ".") and p != "pipeline"
    ]
    if found:
        return max(found)[1]
    raise AssertionError(f"{name}: in no layer of LAYERS (docs/architecture.md): place it")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 40 and sum(map(len, graph.values())) > 80, "the graph lost its modules or edges"
    assert cycles(graph) == []


def test_no_module_imports_a_layer_above_its_own():
    upward = sorted(
        f"{a} -> {b}" for a, targets in import_graph().items() for b in targets if layer_of(b) > layer_of(a)
    )
    assert upward == []


def test_the_checks_see_a_cycle_and_an_upward_import():
    graph = {"pipeline.io": {"pipeline.data.prepared"}, "pipeline.data.prepared": {"pipeline.io"}}
    assert cycles(graph) == [["pipeline.data.prepared", "pipeline.io"]]
    assert layer_of("pipeline.data.prepared") > layer_of("pipeline.io")
    source = "from pipeline.training import trainer\nif TYPE_CHECKING:\n    from pipeline.config import schema\n"
    path = ROOT / "pipeline" / "data" / "prepared.py"
    tree = {"pipeline.training.trainer": path, "pipeline.config.keys.schema": path, "pipeline.data.prepared": path}
    import unittest.mock

    with unittest.mock.patch.object(Path, "read_text", return_value=source):
        assert imports_of("pipeline.data.prepared", path, tree) == {"pipeline.training.trainer"}


def test_a_package_init_holds_its_docstring_alone():
    """Importing a module of a wing runs its package's __init__.py first: with nothing in it but
    what the wing holds, no command pays for a sibling it does not use."""
    for path in [*(ROOT / "pipeline").rglob("__init__.py"), ROOT / "stages" / "__init__.py"]:
        body = ast.parse(path.read_text()).body
        rest = [node for node in body[1:] if not (isinstance(node, ast.Assign) and path.parent.name == "pipeline")]
        assert ast.get_docstring(ast.parse(path.read_text())) and rest == [], f"{path.relative_to(ROOT)}"


# --------------------------------------------------------------------------- imports in functions

# What an import inside a function may keep off a path that does not need it: libraries whose
# import costs a command start-up noticeably (TensorFlow and Keras seconds, MLflow and Optuna about
# a second with SQLAlchemy, pandas, matplotlib and the rest tenths), measured as `python -X
# importtime -c "import X"` shows them. Anything else is imported at the top of its module.
HEAVY = (
    "tensorflow",
    "keras",
    "mlflow",
    "optuna",
    "sqlalchemy",
    "dvc",
    "pandas",
    "matplotlib",
    "numpy",
    "PIL",
    "psutil",
    "psycopg",
    "pyarrow",
    "pynvml",
    "ruamel",
    "tqdm",
)


@functools.cache
def parsed(path: Path) -> ast.Module:
    """Each file parsed once per session: the checks below walk the same modules many times."""
    return ast.parse(path.read_text())


def top_level_libraries(name: str, modules: dict[str, Path], seen: frozenset = frozenset()) -> set[str]:
    """The HEAVY libraries that importing `name` imports: its own top-level imports and those of
    the project's modules it imports at the top, transitively."""
    found = set()
    for node in parsed(modules[name]).body:
        if _type_checking(node) or not isinstance(node, (ast.Import, ast.ImportFrom, ast.If, ast.Try)):
            continue
        for imp in (n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))):
            for target in _targets(imp, name, modules):
                if target.split(".")[0] in HEAVY:
                    found.add(target.split(".")[0])
                elif target in modules and target not in seen and target != name:
                    found |= top_level_libraries(target, modules, seen | {name})
    return found


def _targets(node, name: str, modules: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def function_imports(path: Path):
    """(node, source lines) of each import inside a function of `path`."""
    tree = parsed(path)
    for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for node in ast.walk(function):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node


def test_an_import_inside_a_function_keeps_a_heavy_library_off_a_path_and_says_which():
    modules = module_files()
    wrong = []
    for name, path in modules.items():
        lines = path.read_text().splitlines()
        own = top_level_libraries(name, modules)
        for node in set(function_imports(path)):
            kept_off = set()
            for target in _targets(node, name, modules):
                root = target.split(".")[0]
                kept_off |= (
                    {root} if root in HEAVY else top_level_libraries(target, modules) if target in modules else set()
                )
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if not kept_off - own:
                wrong.append(f"{where}: keeps nothing off ({ast.unparse(node)}): import it at the top")
            elif any(t in modules for t in _targets(node, name, modules)):
                said = " ".join(lines[node.lineno - 2 : node.end_lineno])
                if "#" not in said:
                    wrong.append(f"{where}: say which library it keeps off ({', '.join(sorted(kept_off - own))})")
    assert sorted(wrong) == []


def test_no_function_is_longer_than_sixty_lines():
    """A function that needs more is two: each part gets a name (docstrings count)."""
    long = []
    for path in module_files().values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None  # ast.parse sets it
                if node.end_lineno - node.lineno >= 60:
                    long.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1}"
                    )
    assert long == []
