"""The package's import graph keeps families plug-ins: read from the source (ast), every import counted,
including those inside functions and ``if TYPE_CHECKING:`` blocks.

- no module outside ``accelbuild/targets/<family>/`` imports a family (core code reaches families only
  through ``accelbuild.families``, by the names their entry points give);
- no family imports the engine (a stage gets what it needs from its ``StageContext``) or another family;
- no product module imports ``accelbuild.testing`` (the builders of test models serve tests, examples, benches
  and the lab tools in ``tools/``, never a build);
- no cycle between packages (``accelbuild/<package>``; a family is a package of its own, and
  ``targets/base.py`` with ``targets/profile_files.py`` form ``targets``, the family API). Shared helpers
  live below the packages that use them: graph helpers and onnxruntime sessions in ``util``, seeded
  inputs in ``data``, YAML positions in ``errors``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import accelbuild

ROOT = Path(accelbuild.__file__).resolve().parent
FAMILY_DIRS = {p.name for p in (ROOT / "targets").iterdir() if (p / "__init__.py").is_file()}


def _module_name(path: Path) -> str:
    parts = ["accelbuild", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split(".")[1:])
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _imports(path: Path) -> set[str]:
    """Every accelbuild module ``path`` imports, anywhere in the file."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{a.name}" for a in node.names if _is_module(f"{source}.{a.name}"))
    return {name for name in found if name == "accelbuild" or name.startswith("accelbuild.")}


def _package(module: str) -> str:
    """The node of the package graph a module belongs to."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "targets" and parts[2] in FAMILY_DIRS:
        return f"targets.{parts[2]}"
    return parts[1] if len(parts) > 1 else "accelbuild"


def _edges() -> list[tuple[str, str]]:
    return sorted((_module_name(path), imported) for path in ROOT.rglob("*.py") if "__pycache__" not in path.parts
                  for imported in _imports(path))


def test_the_walk_sees_function_level_and_type_checking_imports() -> None:
    edges = set(_edges())
    assert ("accelbuild.commands.common", "accelbuild.config.load") in edges  # inside a function
    assert ("accelbuild.targets.base", "accelbuild.config.spec") in edges  # under TYPE_CHECKING
    assert {"mx3", "npu", "ethos_u"} <= FAMILY_DIRS


def test_no_core_module_imports_a_family() -> None:
    bad = [f"{a} imports {b}" for a, b in _edges()
           if _package(b).startswith("targets.") and not _package(a).startswith("targets.")]
    assert bad == []


def test_no_family_imports_the_engine_or_another_family() -> None:
    bad = [f"{a} imports {b}" for a, b in _edges() if _package(a).startswith("targets.")
           and (_package(b) == "engine" or (_package(b).startswith("targets.") and _package(b) != _package(a)))]
    assert bad == []


def test_no_product_module_imports_the_test_builders() -> None:
    bad = [f"{a} imports {b}" for a, b in _edges()
           if _package(b) == "testing" and _package(a) != "testing"]
    assert bad == []


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_cycle_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in _edges():
        pa, pb = _package(a), _package(b)
        if pa != pb:
            graph[pa].add(pb)
    cycles = _components(graph)
    assert cycles == [], cycles


def test_the_cycle_finder_finds_cycles() -> None:
    assert _components({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert _components({"a": {"b"}, "b": set()}) == []
