"""The import rules of docs/architecture.md, checked over the source tree.

1. Layers: a package imports only from packages at or below its own layer (LAYERS, lowest
   first). A name with a dot in LAYERS (``spark.sql``) is a module (or subpackage) of its
   own layer, apart from its package: a public import path kept where users find it
   (``carbonstore.spark.sql``) while what it names lives in a higher package. Every rule
   treats it as a package of its own (its imports of its folder's modules are package
   edges).
2. No import cycle between packages, also between packages that share a layer (the
   allowlisted upward edges of KNOWN_UPWARD are left out of this graph: they are reported
   as what they are, and scheduled to go).
3. No private name crosses a module border: ``from carbonstore.x import _name`` and
   ``x._name`` on an imported carbonstore module both fail.
4. No import cycle between the modules of one package (``store.ddl -> store.schema ->
   store.ddl``).
5. No import of a carbonstore module inside a function, unless the allowlist names it with
   its reason (tools/import_allowlist.toml, grouped by the importing module).
6. No module over MAX_LINES lines (generated ``_gen`` code excluded).
7. One file layer: ``pyarrow.fs`` is imported only by the store package (FILE_LAYER), and
   no other package reaches past a StoreFS to its bare pyarrow filesystem (``sfs.fs``,
   ``table.store.sfs.fs``: the ``fs`` attribute of a name or attribute called ``*sfs``).

Every import counts as an edge: one inside a function or under ``if TYPE_CHECKING:`` hides
a cycle, it does not remove it. An allowlist entry that matches nothing fails too, so the
list only shrinks. Exit status 1 with one line per violation; 0 and no output when the
tree is clean.

    python tools/check_imports.py [SOURCE_ROOT] [--allowlist FILE]

The allowlist defaults to SOURCE_ROOT/tools/import_allowlist.toml (none if it is missing).
"""

from __future__ import annotations

import ast
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "carbonstore"
MAX_LINES = 600
ALLOWLIST = Path("tools") / "import_allowlist.toml"

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
    {"dml"},  # DELETE / UPDATE / MERGE as Spark jobs
    # the SQL front end: the statement language and its one router, DML statements run on
    # dml/, the router's Spark engine; spark.sql is its public face carbonstore.spark.sql
    {"sql", "spark.sql"},
    {"api", "table"},  # table/: the JVM-free scan and append of api's Table
    {"cli", "__main__"},  # __main__: python -m carbonstore runs the CLI
    {"demo"},
]

# Edges that exist today and are scheduled to go (issue 17's layout), as (module, imported
# package). A new entry here needs a reason in the commit that adds it.
KNOWN_UPWARD: set[tuple[str, str]] = set()
KNOWN_PRIVATE: set[tuple[str, str]] = set()

# The package that owns file access (StoreFS, carbonstore/store/fs.py): the only one that
# imports pyarrow.fs or uses a StoreFS's bare filesystem.
FILE_LAYER = "store"


@dataclass
class Allowlist:
    """tools/import_allowlist.toml: what the rules 4-6 let pass today, each with its reason."""

    lazy: dict[tuple[str, str], str] = field(default_factory=dict)  # (module, target) -> why
    cycles: dict[frozenset[str], str] = field(default_factory=dict)  # modules -> why
    long: dict[str, str] = field(default_factory=dict)  # module -> why
    path: str = str(ALLOWLIST)


def load_allowlist(path: Path) -> tuple[Allowlist, list[str]]:
    allow = Allowlist(path=str(path))
    if not path.exists():
        return allow, []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        return allow, [f"{path}: not TOML: {exc}"]
    problems = []
    for module, targets in data.get("lazy", {}).items():
        for target, reason in targets.items():
            allow.lazy[(module, target)] = reason
    for entry in data.get("cycle", []):
        allow.cycles[frozenset(entry.get("modules", []))] = entry.get("reason", "")
    allow.long.update(data.get("long", {}))
    reasons = [*allow.lazy.values(), *allow.cycles.values(), *allow.long.values()]
    if any(not isinstance(r, str) or not r.strip() for r in reasons):
        problems.append(f"{path}: every entry needs its reason")
    return allow, problems


@dataclass(frozen=True)
class Import:
    lineno: int
    target: str  # the carbonstore module (or package __init__) imported
    in_function: bool


def _layer(package: str) -> int | None:
    for i, names in enumerate(LAYERS):
        if package in names:
            return i
    return None


def _units() -> list[str]:
    """The dotted names of LAYERS (modules placed apart from their package), longest first."""
    return sorted((n for names in LAYERS for n in names if "." in n), key=len, reverse=True)


def _top(module: str) -> str | None:
    """The unit ``module`` belongs to: its package, or the dotted LAYERS name it is or is in."""
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    rest = ".".join(parts[1:])
    for unit in _units():
        if rest == unit or rest.startswith(unit + "."):
            return unit
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


def _import_nodes(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement with whether it sits inside a function (at any depth)."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child, in_function))
            walk(child, in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    walk(tree, False)
    return found


def _sccs(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), sorted."""
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
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def _cycles(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """Each strongly connected component as a cycle through its first node, sorted."""
    return sorted(_path(component, edges) for component in _sccs(edges))


def _path(component: list[str], edges: dict[str, dict[str, str]]) -> list[str]:
    """A shortest cycle from the first node of ``component`` back to it (BFS)."""
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


def _short(module: str) -> str:
    return module.removeprefix(PACKAGE + ".")


def _read_imports(module: str, path: Path, is_package: bool, tree: ast.AST,
                  modules: dict[str, tuple[Path, bool]], problems: list[str]) -> list[Import]:
    """The carbonstore modules ``module`` imports; private names crossing its border are
    added to ``problems``."""
    aliases: dict[str, str] = {}  # local name -> carbonstore module it names
    imported: list[Import] = []
    for node, in_function in _import_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    imported.append(Import(node.lineno, alias.name, in_function))
                    if alias.asname:
                        aliases[alias.asname] = alias.name
            continue
        target = _resolve(node, module, is_package)
        if not target or not (target == PACKAGE or target.startswith(PACKAGE + ".")):
            continue
        for alias in node.names:
            full = f"{target}.{alias.name}"
            if full in modules:  # from carbonstore.store import fs
                aliases[alias.asname or alias.name] = full
                imported.append(Import(node.lineno, full, in_function))
                continue
            imported.append(Import(node.lineno, target, in_function))
            if alias.name.startswith("_") and (module, full) not in KNOWN_PRIVATE:
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
    return imported


def _imports_pyarrow_fs(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name == "pyarrow.fs" or a.name.startswith("pyarrow.fs.") for a in node.names)
    if node.level:
        return False
    if node.module == "pyarrow":
        return any(a.name == "fs" for a in node.names)
    return node.module is not None and (node.module == "pyarrow.fs"
                                        or node.module.startswith("pyarrow.fs."))


def _file_layer_problems(path: Path, tree: ast.AST) -> list[str]:
    """Rule 7 for a module outside the store package."""
    problems = [f"{path}:{node.lineno}: import of pyarrow.fs outside the store's file layer: "
                "use StoreFS (carbonstore/store/fs.py)"
                for node, _ in _import_nodes(tree) if _imports_pyarrow_fs(node)]
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr == "fs"):
            continue
        owner = node.value
        name = (owner.id if isinstance(owner, ast.Name)
                else owner.attr if isinstance(owner, ast.Attribute) else "")
        if name.endswith("sfs"):
            problems.append(f"{path}:{node.lineno}: bare filesystem of a StoreFS ({name}.fs) "
                            "outside the store's file layer: call StoreFS's own method")
    return problems


def check(root: Path, allowlist: Path | None = None) -> list[str]:
    modules = _modules(root)
    allow, problems = load_allowlist(allowlist or root / ALLOWLIST)
    # package -> imported package -> the first place it is imported ("path:line")
    edges: dict[str, dict[str, str]] = {}
    # module -> imported module of the same package -> the first place it is imported
    module_edges: dict[str, dict[str, str]] = {}
    lazy_used: set[tuple[str, str]] = set()
    long_used: set[str] = set()
    for module, (path, is_package) in modules.items():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_LINES:
            if module in allow.long:
                long_used.add(module)
            else:
                problems.append(f"{path}: {lines} lines, over {MAX_LINES}: move a coherent "
                                "concept into a module of its own")
        tree = ast.parse(text, filename=str(path))
        own = _top(module)
        own_layer = _layer(own) if own else None
        if own != FILE_LAYER:
            problems.extend(_file_layer_problems(path, tree))
        for imp in _read_imports(module, path, is_package, tree, modules, problems):
            where = f"{path}:{imp.lineno}"
            if imp.in_function and imp.target != module:
                if (module, imp.target) in allow.lazy:
                    lazy_used.add((module, imp.target))
                else:
                    problems.append(f"{where}: import of {imp.target} inside a function: move it "
                                    f"to the top, or list it with its reason in {allow.path}")
            theirs = _top(imp.target)
            if own is None or theirs is None:
                continue
            if theirs == own:
                if imp.target != module:
                    module_edges.setdefault(module, {}).setdefault(imp.target, where)
                continue
            if (module, theirs) not in KNOWN_UPWARD:
                edges.setdefault(own, {}).setdefault(theirs, where)
            their_layer = _layer(theirs)
            if own_layer is None or their_layer is None:
                problems.append(f"{where}: package {own if own_layer is None else theirs}"
                                " has no layer in tools/check_imports.py")
            elif their_layer > own_layer and (module, theirs) not in KNOWN_UPWARD:
                problems.append(f"{where}: upward import: {own} imports {theirs}")
    for cycle in _cycles(edges):
        where = "; ".join(f"{a} -> {b} at {edges[a][b]}" for a, b in zip(cycle, cycle[1:], strict=False))
        problems.append(f"import cycle between packages {' -> '.join(cycle)} ({where})")
    cycles_used: set[frozenset[str]] = set()
    for component in _sccs(module_edges):
        if frozenset(component) in allow.cycles:
            cycles_used.add(frozenset(component))
            continue
        cycle = _path(component, module_edges)
        where = "; ".join(f"{_short(a)} -> {_short(b)} at {module_edges[a][b]}"
                          for a, b in zip(cycle, cycle[1:], strict=False))
        problems.append(f"import cycle between modules of {_top(cycle[0])}: "
                        f"{' -> '.join(_short(m) for m in cycle)} ({where})")
    for module, target in sorted(set(allow.lazy) - lazy_used):
        problems.append(f"{allow.path}: [lazy.\"{module}\"] \"{target}\" matches no import inside "
                        "a function: remove the entry")
    for members in sorted(set(allow.cycles) - cycles_used, key=sorted):
        problems.append(f"{allow.path}: the cycle {sorted(members)} is not a cycle of the tree "
                        "(gone, or changed): remove or correct the entry")
    for module in sorted(set(allow.long) - long_used):
        problems.append(f"{allow.path}: [long] \"{module}\" is not over {MAX_LINES} lines: "
                        "remove the entry")
    return sorted(set(problems))


def main(argv: list[str]) -> int:
    args = argv[1:]
    allowlist = None
    if "--allowlist" in args:
        at = args.index("--allowlist")
        allowlist = Path(args[at + 1])
        del args[at:at + 2]
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent
    problems = check(root, allowlist)
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
