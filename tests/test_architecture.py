"""The package layout: an import graph of `cpmobius/` without cycles, no file past 450 lines, a
docstring in every subpackage's ``__init__.py``, each room importing only what it says it may, and ``tests/``
mirroring the package (a room's tests in ``tests/<room>/``, those of top-level modules and whole runs in ``tests/``).

The graph is computed from the code with `ast`: every ``import`` / ``from ... import`` anywhere in a
module (inside functions and ``if TYPE_CHECKING:`` blocks too), relative imports resolved. ``from pkg
import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``; a package's
``__init__.py`` is the node of the package itself, and importing ``pkg.mod`` also runs ``pkg``'s
``__init__`` (an edge to ``pkg``, except from inside ``pkg``, which is already importing), so a cycle
through an ``__init__`` counts.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = "cpmobius"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE
MAX_LINES = 450

# What each room may import of cpmobius besides itself (its `__init__` docstring says the same).
ROOM_IMPORTS = {
    "grading": {"jsonl"},  # its CLI reads JSON lines with cpmobius.jsonl
    "toy": {"cpu_kernels"},  # cpu_kernels: a leaf (standard library only), the CPU run's kernel settings
    "eval": {"grading", "jsonl", "prompts"},
    # error_text: a leaf, the one line quoting an error; clock: a leaf, the stage clock the policies time their ops on
    "engine": {"config", "prompts", "cpu_kernels", "error_text", "clock"},
    "warmup": {"config", "engine", "coach", "prompts", "settings", "jsonl", "cpu_kernels"},
    "config": {"error_text"},  # the run's config: Hydra and OmegaConf, nothing of the method or of verl
    "models": set(),
    "baselines": set(),  # the baselines' rewards: numpy, torch, nltk, scikit-learn only
}


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name → file, for every ``.py`` under ``root`` (``pkg/__init__.py`` is ``pkg``)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name ``module`` imports (absolute, relative ones resolved), with ``from a import b``
    given as ``a.b`` (`import_graph` maps it to ``a`` when ``b`` is not a module)."""
    is_package = path.name == "__init__.py"
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the cpmobius modules (and packages) importing it runs."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for imported in imported_names(name, path):
            # `a.b.c` → the longest prefix that is a module; `from a import name` (not a module) → `a`.
            parts = imported.split(".")
            while parts and ".".join(parts) not in modules:
                parts.pop()
            if not parts:
                continue
            target = ".".join(parts)
            # Importing a.b.c runs a/__init__ and a/b/__init__ first (unless they are already importing).
            for i in range(1, len(parts) + 1):
                step = ".".join(parts[:i])
                if step != name and not name.startswith(step + "."):
                    graph[name].add(step)
            if target != name:
                graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path ``[a, b, ..., a]``, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def room_of(module: str) -> str:
    """``cpmobius.eval.scoring`` → ``eval``; a top-level module is its own room (``jsonl``)."""
    return module.split(".")[1] if "." in module else ""


def test_the_import_graph_has_no_cycle():
    graph = import_graph(module_files())
    assert graph[f"{PACKAGE}.loop"], "the graph reads no imports at all: the parser is broken"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_finder_reports_a_cycle_through_an_init(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text('"""Top."""\n')
    (package / "a.py").write_text("def f():\n    from pkg.sub import b  # inside a function: still an edge\n")
    (package / "sub" / "__init__.py").write_text('"""Sub."""\nfrom . import b\n')
    (package / "sub" / "b.py").write_text("from ..a import f\n")
    graph = import_graph(module_files(package))
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.b"}
    assert graph["pkg.sub"] == {"pkg.sub.b"}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub", "pkg.sub.b", "pkg.a"]
    (package / "sub" / "b.py").write_text("from pkg import a\n")
    assert find_cycle(import_graph(module_files(package))) is not None
    (package / "sub" / "b.py").write_text("import os\n")
    assert find_cycle(import_graph(module_files(package))) is None


@pytest.mark.parametrize("module", sorted(module_files()))
def test_no_file_is_over_the_line_limit(module):
    lines = len(module_files()[module].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{module}: {lines} lines (limit {MAX_LINES}): split it by responsibility"


def test_every_subpackage_says_what_it_holds_and_may_import():
    packages = [name for name, path in module_files().items() if path.name == "__init__.py" and name != PACKAGE]
    assert {room_of(p) for p in packages} >= set(ROOM_IMPORTS)
    for package in packages:
        doc = ast.get_docstring(ast.parse(module_files()[package].read_text(encoding="utf-8")))
        assert doc, f"{package}/__init__.py: a docstring saying what the room holds and what it may import"
        assert "may import" in doc, f"{package}/__init__.py: the docstring should say what the room may import"


def test_each_room_imports_only_what_it_may():
    graph = import_graph(module_files())
    wrong = []
    for module, targets in graph.items():
        room = room_of(module)
        if room not in ROOM_IMPORTS:
            continue
        allowed = ROOM_IMPORTS[room] | {room, ""}  # "" = the bare cpmobius package
        wrong += [f"{module} -> {t}" for t in sorted(targets) if room_of(t) not in allowed]
    assert not wrong, "imports outside the room's rules:\n" + "\n".join(wrong)


def documented_modules(text: str) -> set[str]:
    """The dotted modules docs/architecture.md's tree names: its ``cpmobius/`` block, a ``name/`` line opening a
    package (by indentation), a ``name.py`` line (or ``a.py, b.py``) naming modules of the package above it."""
    lines = text.split("```text\ncpmobius/\n", 1)[1].split("```", 1)[0].splitlines()
    packages: list[tuple[int, str]] = []  # (indent, dotted package) of the open packages
    names = set()
    for line in lines:
        if not line.strip() or not line.startswith("  "):
            break  # the block's other top-level folders (configs/, benchmarks/, ...)
        indent = len(line) - len(line.lstrip())
        first = line.split("  ", 1)[0] if not line.startswith(" ") else line.strip().split("  ")[0]
        while packages and packages[-1][0] >= indent:
            packages.pop()
        parent = packages[-1][1] if packages else PACKAGE
        if first.endswith("/"):
            packages.append((indent, f"{parent}.{first[:-1]}"))
            names.add(packages[-1][1])
        for name in first.split(", "):
            if name.endswith(".py"):
                stem = name[:-3]
                names.add(parent if stem == "__init__" else f"{parent}.{stem}")
    return names


def test_docs_architecture_names_every_module():
    """A module added without its line in docs/architecture.md's tree fails here (15 were missing, then 34)."""
    text = (ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    documented = documented_modules(text)
    missing = sorted(set(module_files()) - documented - {PACKAGE})
    assert not missing, f"docs/architecture.md's tree does not name: {missing}"
    stale = sorted(documented - set(module_files()))
    assert not stale, f"docs/architecture.md's tree names modules that do not exist: {stale}"


def test_the_tests_mirror_the_package():
    """Each subfolder of tests/ is a room of cpmobius/ holding tests, on pytest's ``pythonpath`` (a test module another
    one imports is found there) and no package (verl's wheel installs a top-level ``tests``)."""
    tests = ROOT.parent / "tests"
    folders = sorted(p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__pycache__")))
    assert folders, "tests/ has no subfolder: the listing is broken"
    for name in folders:
        assert (ROOT / name / "__init__.py").is_file(), f"tests/{name}/ names no package {PACKAGE}/{name}/"
        assert any((tests / name).glob("test_*.py")), f"tests/{name}/ holds no test_*.py"
        assert not (tests / name / "__init__.py").exists(), f"tests/{name}/__init__.py: the test folder is no package"
    pyproject = (ROOT.parent / "pyproject.toml").read_text(encoding="utf-8")
    pythonpath = pyproject.split("[tool.pytest.ini_options]", 1)[1].split("pythonpath = [", 1)[1].split("]", 1)[0]
    listed = sorted(re.findall(r'"tests/(\w+)"', pythonpath))
    assert listed == folders, "pyproject.toml's pytest pythonpath should list every subfolder of tests/"
