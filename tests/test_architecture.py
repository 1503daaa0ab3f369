"""The three tiers, checked from the source (docs/architecture.md).

1. Format core, one folder (``lakecore.core``): locations, keys, defs, storage, node, tree,
   versions, commit, view, the lookup codec and its version cache, units, display. Beside it
   at the package's top only ``lakecore.errors`` (the one error hierarchy every tier shares)
   and the package itself. It imports nothing but itself and ``lakecore.errors``.
2. Engine-neutral catalog and maintenance, one package each: ``lakecore.lakehouse`` (the
   catalog API and the operations on a lakehouse), ``lakecore.maintenance``,
   ``lakecore.iceberg``, ``lakecore.rest``; over them the job contract, ``lakecore.contract``
   (a job's arguments, options, outputs, report and renderer); then the command line,
   ``lakecore.cli``, on top. Never pyspark or jobs/. ``lakecore.maintenance`` never imports
   the catalog API (``lakecore.lakehouse``) nor the Iceberg catalog (``lakecore.iceberg``).
3. Spark: jobs/.

Every import counts, also one inside a function: a deferred import is still a dependency.
The tests also refuse import circles and private names (``_x``) imported across modules; in
``PRIVATE_ATTRIBUTE_PACKAGES``, a private attribute reached across modules: ``obj._x`` (or
``self._x``) where ``_x`` is not this module's own (defined or assigned here) nor inherited
from another project's base class (pyiceberg's ``Catalog`` hooks a catalog overrides); and any
import of the command line (``lakecore.cli``) in jobs/: the jobs read the job contract.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("lakecore", "jobs")
# Tier of each module, by the longest matching prefix. The job contract sits on the catalog and
# maintenance, the CLI on top of it.
TIERS: dict[str, float] = {
    "lakecore": 1,
    "lakecore.errors": 1,
    "lakecore.core": 1,
    "lakecore.lakehouse": 2,
    "lakecore.maintenance": 2,
    "lakecore.iceberg": 2,
    "lakecore.rest": 2,
    "lakecore.contract": 2.25,
    "lakecore.cli": 2.5,
    "jobs": 3,
}
ENGINES = ("pyspark", "great_expectations", "py4j")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module (or module.name for a name imported from a module)
    names: tuple[str, ...]
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "defs/lakecore_pb2" in path.as_posix():
                continue
            found[module_name(path)] = path
    return found


def imports_of(name: str, path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(name, alias.name, (), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield Import(name, target, tuple(a.name for a in node.names), node.lineno)


def all_imports() -> list[Import]:
    return [imp for name, path in modules().items() for imp in imports_of(name, path)]


def tier(module: str) -> float | None:
    if module == "lakecore":
        return 2  # the package's facade (``lakecore.Lakehouse``), not the format core
    best = None
    for prefix, value in TIERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and (
            best is None or len(prefix) > len(best[0])
        ):
            best = (prefix, value)
    return None if best is None else best[1]


def resolve(target: str, names: tuple[str, ...], known: set[str]) -> list[str]:
    """The project modules an import reaches: ``from a import b`` is module ``a.b`` when that
    is a module, else module ``a``."""
    out = []
    for name in names or ("",):
        candidate = f"{target}.{name}" if name else target
        if candidate in known:
            out.append(candidate)
        elif target in known:
            out.append(target)
    return sorted(set(out))


def graph() -> dict[str, set[str]]:
    known = set(modules())
    edges: dict[str, set[str]] = {m: set() for m in known}
    for imp in all_imports():
        for target in resolve(imp.target, imp.names, known):
            if target != imp.source and not imp.source.startswith(
                target + "."
            ):  # a package's own parent
                edges[imp.source].add(target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
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
    return found


def upward_imports() -> list[str]:
    out = []
    known = set(modules())
    for imp in all_imports():
        source_tier = tier(imp.source)
        if imp.target.split(".")[0] in ENGINES and source_tier is not None and source_tier < 3:
            out.append(f"{imp.source}:{imp.line} imports {imp.target} (an engine) below tier 3")
        for target in resolve(imp.target, imp.names, known):
            target_tier = tier(target)
            if source_tier is not None and target_tier is not None and target_tier > source_tier:
                out.append(
                    f"{imp.source}:{imp.line} (tier {source_tier}) imports {target} (tier {target_tier})"
                )
            if imp.source.startswith("lakecore.maintenance") and target == "lakecore.lakehouse":
                out.append(f"{imp.source}:{imp.line} imports the catalog API lakecore.lakehouse")
            if imp.source.startswith("lakecore.maintenance") and (
                target == "lakecore.iceberg" or target.startswith("lakecore.iceberg.")
            ):
                out.append(f"{imp.source}:{imp.line} imports the Iceberg catalog {target}")
    return out


# Private names of other projects a module uses on purpose, each with its reason; every other
# private import is refused (of lakecore's own modules, always).
ALLOWED_FOREIGN_PRIVATE: dict[tuple[str, str], str] = {
    (
        "lakecore.iceberg.updates",
        "pyiceberg.table.update",
    ): "pyiceberg's update functions, applied without update_table_metadata's deep copy of the "
    "whole metadata (the largest CPU cost of a commit); a test holds the result equal to "
    "update_table_metadata's, and pyproject pins pyiceberg <0.13",
}


def private_imports() -> list[str]:
    out = []
    for imp in all_imports():
        for name in imp.names:
            if name.startswith("_") and not name.startswith("__"):
                own = imp.target.split(".")[0] in ("lakecore", "jobs")
                if own or (imp.source, imp.target) not in ALLOWED_FOREIGN_PRIVATE:
                    out.append(f"{imp.source}:{imp.line} imports {imp.target}.{name}")
    return out


# Where a private attribute may not be reached across modules: classes there hold collaborators
# with public methods, not mixins that share private state through ``self``.
PRIVATE_ATTRIBUTE_PACKAGES = (
    "lakecore.iceberg",
    "lakecore.lakehouse",
    "lakecore.maintenance",
    "lakecore.rest",
)
# Private attributes of other projects a module reaches on purpose, each with its reason.
ALLOWED_FOREIGN_PRIVATE_ATTRIBUTES: dict[tuple[str, str], str] = {}


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def own_names(tree: ast.Module) -> set[str]:
    """The private names a module defines: its functions, classes and module-level names, its
    classes' methods and class attributes, and every attribute it assigns (``self._x = ...``)."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
    return {name for name in own if is_private(name)}


def private_attribute_reaches(packages: tuple[str, ...] = PRIVATE_ATTRIBUTE_PACKAGES) -> list[str]:
    """``x._name`` where ``_name`` is another module's: on ``self``/``cls``/``super()`` it must
    be this module's own or come from another project's base class (found in the class's MRO);
    on any other object it must be this module's own (or allowed, with its reason)."""
    out = []
    for name, path in modules().items():
        if not name.startswith(packages):
            continue
        tree = ast.parse(path.read_text(), str(path))
        own = own_names(tree)
        classes: dict[ast.AST, str] = {}  # each node inside a top-level class: the class's name
        for top in tree.body:
            if isinstance(top, ast.ClassDef):
                for inner in ast.walk(top):
                    classes[inner] = top.name
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not is_private(node.attr) or node.attr in own:
                continue
            value = node.value
            on_self = (isinstance(value, ast.Name) and value.id in ("self", "cls")) or (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id == "super"
            )
            if on_self and node in classes:
                # Imported only here (the MRO says whose it is): most modules need no import.
                cls = getattr(importlib.import_module(name), classes[node])
                owner = next((k for k in cls.__mro__ if node.attr in vars(k)), None)
                if owner is not None and not owner.__module__.startswith(("lakecore", "jobs")):
                    continue  # a hook of another project's base class
                where = "an instance attribute set elsewhere" if owner is None else owner.__module__
                out.append(f"{name}:{node.lineno} reaches self.{node.attr} ({where})")
            elif not on_self:
                target = ast.unparse(value)
                if (name, node.attr) not in ALLOWED_FOREIGN_PRIVATE_ATTRIBUTES:
                    out.append(f"{name}:{node.lineno} reaches {target}.{node.attr}")
    return out


def test_no_import_circles() -> None:
    assert circles(graph()) == []


def test_imports_only_go_down_the_tiers() -> None:
    assert upward_imports() == []


def test_no_private_names_across_modules() -> None:
    assert private_imports() == []


def test_no_private_attributes_across_modules() -> None:
    """A class in ``PRIVATE_ATTRIBUTE_PACKAGES`` reaches only its own module's private
    attributes: what it shares with another module's class goes through a public method."""
    assert private_attribute_reaches() == []


def test_every_module_has_a_tier() -> None:
    assert [m for m in modules() if tier(m) is None] == []


def command_line_imports_of_jobs() -> list[str]:
    """Every import in jobs/ that reaches the command line (``lakecore.cli``), also through
    ``from lakecore import cli``."""
    known = set(modules())
    return [
        f"{imp.source}:{imp.line} imports {target}"
        for imp in all_imports()
        if imp.source == "jobs" or imp.source.startswith("jobs.")
        for target in resolve(imp.target, imp.names, known)
        if target == "lakecore.cli" or target.startswith("lakecore.cli.")
    ]


def test_the_jobs_never_import_the_command_line() -> None:
    """The Spark jobs read the job contract (``lakecore.contract``: parser, options, outputs,
    report, renderers), never the command line: ``lakecore.cli`` is a shell over the same
    contract, for a person at a terminal."""
    assert command_line_imports_of_jobs() == []


def test_the_format_core_is_one_folder() -> None:
    """Tier 1 is lakecore/core/ (plus the error hierarchy and the package's entry), and the
    core reaches nothing outside itself but the errors: not even the package's lazy entry."""
    loose = [
        m
        for m in modules()
        if tier(m) == 1
        and m not in ("lakecore", "lakecore.errors")
        and not m.startswith("lakecore.core")
    ]
    assert loose == []
    outside = [
        f"{source} imports {target}"
        for source, targets in graph().items()
        if source.startswith("lakecore.core")
        for target in targets
        if not target.startswith("lakecore.core") and target != "lakecore.errors"
    ]
    assert outside == []


if __name__ == "__main__":  # the numbers for a closing note
    sizes = sorted(
        ((len(p.read_text().splitlines()), m) for m, p in modules().items()), reverse=True
    )
    print(
        {
            "circles": circles(graph()),
            "upward_imports": len(upward_imports()),
            "private_imports": len(private_imports()),
            "private_attribute_reaches": len(private_attribute_reaches()),
            "jobs_importing_the_cli": len(command_line_imports_of_jobs()),
            "largest_modules": sizes[:3],
        }
    )
    for line in (
        upward_imports()
        + private_imports()
        + private_attribute_reaches()
        + command_line_imports_of_jobs()
    ):
        print(" ", line)
