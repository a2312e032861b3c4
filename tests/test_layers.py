"""The package's stages import one way (docs/architecture.md), checked from the source.

Every ``import`` and ``from … import`` in ``cann_diff/`` (at module level, inside
functions and under TYPE_CHECKING alike) is resolved to a module of the package; the
stages' order is read → match → compare → findings → report → render → pipeline → cli.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cann_diff"
ORDER = ("read", "match", "compare", "findings", "report", "render", "pipeline", "cli")
BASE = ("errors", "format", "schema", "settings", "vocab", "allocator", "processes", "costs")


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The package modules ``path`` imports (``from . import x`` counts x, a module)."""
    here = _module(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("cann_diff")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("cann_diff"):
                continue
            if node.module or node.level == 0:  # ``from .. import x`` names modules only
                found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names
                      if (PACKAGE.parent / f"{target}.{a.name}".replace(".", "/")).exists()
                      or (PACKAGE.parent / (f"{target}.{a.name}".replace(".", "/") + ".py"))
                      .exists()}
    return found


GRAPH = {_module(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def _stage(module: str) -> str | None:
    """The stage or base module a package module belongs to (None: the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_module_belongs_to_a_stage_or_the_base():
    unknown = {m for m in GRAPH if _stage(m) not in (*ORDER, *BASE, None, "__main__")}
    assert not unknown, f"modules outside every stage: {sorted(unknown)}"


@pytest.mark.parametrize("stage", ORDER)
def test_a_stage_imports_only_earlier_stages_and_base_modules(stage):
    later = set(ORDER[ORDER.index(stage) + 1:])
    wrong = {(m, i) for m, imports in GRAPH.items() if _stage(m) == stage
             for i in imports if _stage(i) in later}
    assert not wrong, f"{stage} imports a later stage: {sorted(wrong)}"


def test_after_reading_nothing_imports_a_reader():
    after = set(ORDER[1:]) - {"pipeline", "cli"}
    wrong = {(m, i) for m, imports in GRAPH.items() if _stage(m) in after
             for i in imports if _stage(i) == "read"}
    assert not wrong, sorted(wrong)


def test_renderers_read_the_report_and_base_modules_only():
    allowed = {"render", "report", *BASE}
    wrong = {(m, i) for m, imports in GRAPH.items() if _stage(m) == "render"
             for i in imports if _stage(i) not in allowed}
    assert not wrong, sorted(wrong)


def test_base_modules_import_no_stage():
    wrong = {(m, i) for m, imports in GRAPH.items() if _stage(m) in BASE
             for i in imports if _stage(i) in ORDER}
    assert not wrong, sorted(wrong)


def test_no_import_circle():
    """Depth-first search over the module graph; a back edge is a circle."""
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = 1
        for target in sorted(GRAPH.get(module, ())):
            if target not in GRAPH or target == module or module.startswith(target + "."):
                continue  # a package's own __init__ imported by its modules is no circle
            if state.get(target) == 1:
                return [*path, module, target]
            if target not in state and (found := visit(target, [*path, module])):
                return found
        state[module] = 2
        return None

    for module in GRAPH:
        if module not in state:
            circle = visit(module, [])
            assert circle is None, " -> ".join(circle)


def test_nothing_cites_a_document_the_repository_lacks():
    root = PACKAGE.parent
    cited = {(p.relative_to(root), word) for p in PACKAGE.rglob("*")
             if p.suffix in (".py", ".json")
             for word in ("DESIGN.md", "FORMATS.md", "REALDATA.md", "STYLE.md", "../shared")
             if word in p.read_text(encoding="utf-8")}
    assert not cited, sorted(cited)
