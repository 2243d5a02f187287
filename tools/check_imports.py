"""The import rules of docs/architecture.md, checked over the source tree.

1. Layers: a package imports only from packages at or below its own layer (LAYERS, lowest
   first).
2. No import cycle between packages, also between packages that share a layer (the
   allowlisted upward edges of KNOWN_UPWARD are left out of this graph: they are reported
   as what they are, and scheduled to go).
3. No private name crosses a module border: ``from carbonstore.x import _name`` and
   ``x._name`` on an imported carbonstore module both fail.

Imports inside functions count: a lazy import hides a cycle, it does not remove it.
Exit status 1 with one line per violation; 0 and no output when the tree is clean.

    python tools/check_imports.py [SOURCE_ROOT]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "carbonstore"

# Lowest first; names in one set share a layer. Packages that do not exist (yet) cost
# nothing. "api" is the module carbonstore/api.py (the user's Store and Table).
LAYERS: list[set[str]] = [
    {"errors", "limits", "progress"},
    {"store"},
    {"expressions"},
    {"dictionary"},
    {"indexfiles"},
    {"pruning"},
    {"statistics"},
    {"segments"},
    {"spark"},
    {"dml"},
    {"api"},
    {"cli"},
    {"demo"},
]

# Edges that exist today and are scheduled to go (issue 17's layout), as (module, imported
# package). A new entry here needs a reason in the commit that adds it.
KNOWN_UPWARD: set[tuple[str, str]] = {
    # the SQL DELETE / UPDATE / MERGE statements run on the Spark DML engine; the module
    # moves to the sql package above it
    ("carbonstore.segments.dml_sql", "dml"),
}
KNOWN_PRIVATE: set[tuple[str, str]] = set()


def _layer(package: str) -> int | None:
    for i, names in enumerate(LAYERS):
        if package in names:
            return i
    return None


def _top(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    return parts[1]


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str | None:
    if node.level == 0:
        return node.module
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        if "_gen" in rel.parts:
            continue
        is_package = rel.name == "__init__"
        parts = rel.parts[:-1] if is_package else rel.parts
        found[".".join(parts)] = (path, is_package)
    return found


def _cycles(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one package (Tarjan), each as a
    cycle through all its packages where one exists, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_path(sorted(component), edges))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def _path(component: list[str], edges: dict[str, dict[str, str]]) -> list[str]:
    """A shortest cycle from the first package of ``component`` back to it (BFS)."""
    start = component[0]
    members = set(component)
    previous: dict[str, str] = {}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges.get(v, {})):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if w in members and w not in previous:
                previous[w] = v
                queue.append(w)
    return [*component, start]  # not reached: a component of two or more has a cycle


def check(root: Path) -> list[str]:
    modules = _modules(root)
    problems: list[str] = []
    # package -> imported package -> the first place it is imported ("path:line")
    edges: dict[str, dict[str, str]] = {}
    for module, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        own = _top(module)
        own_layer = _layer(own) if own else None
        aliases: dict[str, str] = {}  # local name -> carbonstore module it names
        imported: list[tuple[int, str]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(PACKAGE + "."):
                        imported.append((node.lineno, alias.name))
                        if alias.asname:
                            aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(node, module, is_package)
                if not target or not (target == PACKAGE or target.startswith(PACKAGE + ".")):
                    continue
                if target != PACKAGE:
                    imported.append((node.lineno, target))
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    if full in modules:
                        aliases[alias.asname or alias.name] = full
                        imported.append((node.lineno, full))  # from carbonstore import x
                    elif alias.name.startswith("_") and (module, full) not in KNOWN_PRIVATE:
                        problems.append(f"{path}:{node.lineno}: private name {alias.name} "
                                        f"imported from {target}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in aliases):
                target = aliases[node.value.id]
                full = f"{target}.{node.attr}"
                if target != module and (module, full) not in KNOWN_PRIVATE:
                    problems.append(f"{path}:{node.lineno}: private name {node.attr} "
                                    f"used from {target}")
        for lineno, target in imported:
            theirs = _top(target)
            if own is None or theirs is None or theirs == own:
                continue
            if (module, theirs) not in KNOWN_UPWARD:
                edges.setdefault(own, {}).setdefault(theirs, f"{path}:{lineno}")
            their_layer = _layer(theirs)
            if own_layer is None or their_layer is None:
                problems.append(f"{path}:{lineno}: package {own if own_layer is None else theirs}"
                                " has no layer in tools/check_imports.py")
            elif their_layer > own_layer and (module, theirs) not in KNOWN_UPWARD:
                problems.append(f"{path}:{lineno}: upward import: {own} imports {theirs}")
    for cycle in _cycles(edges):
        where = "; ".join(f"{a} -> {b} at {edges[a][b]}" for a, b in zip(cycle, cycle[1:], strict=False))
        problems.append(f"import cycle between packages {' -> '.join(cycle)} ({where})")
    return sorted(set(problems))


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    problems = check(root)
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
