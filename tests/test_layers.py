"""The layer rule of docs/architecture.md, checked on every import of the project's code.

``acidstream.acid`` <- ``acidstream.txn`` <- ``acidstream.mutation`` <- {``.ingest``,
``.sources``, ``.compaction``, ``.recovery``} <- ``acidstream.sinks`` <- the application layer
(``acidstream`` itself: the facade, the Table handle, ``acidstream.cli``, ``acidstream.jobs``):
a module may import its own layer's package and any layer below it; the four siblings never
import each other. Every import counts: module-level, inside functions and classes, under
``if TYPE_CHECKING:``, ``import X`` and ``from X import Y``, relative imports resolved against
the importing module.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PACKAGE = ROOT / "acidstream"

# Higher rank = higher layer. Packages of one rank are siblings: none may import another.
# "acidstream" is the application layer: every module of the package outside the six below.
RANK = {
    "acid": 0,
    "txn": 1,
    "mutation": 2,  # row-level change: streaming upserts (ingest) and sinks build on it
    "ingest": 3,
    "sources": 3,
    "compaction": 3,
    "recovery": 3,
    "sinks": 4,
    "acidstream": 5,
}


@dataclass(frozen=True)
class Arrow:
    """One import against the rule: ``where`` (file:line) in ``importer`` imports ``imported``."""

    where: str
    importer: str
    imported: str

    def __str__(self) -> str:
        return f"{self.where} {self.importer} -> {self.imported}"


def module_name(path: Path, root: Path) -> tuple[str, bool]:
    """The dotted module name of ``path`` under ``root`` and whether it is a package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Every module ``source`` imports, as (line, absolute dotted name), wherever it appears.

    ``ast.walk`` visits every node, so imports inside functions, classes and
    ``if TYPE_CHECKING:`` blocks are found like module-level ones. A relative import is
    resolved against ``module`` (its package, if ``module`` is a package itself).
    """
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                assert node.module is not None
                found.append((node.lineno, node.module))
            else:
                base = package[: len(package) - (node.level - 1)]
                if node.module:
                    found.append((node.lineno, ".".join([*base, node.module])))
                else:  # "from .. import x": each name is a module (or a package's name)
                    found.extend((node.lineno, ".".join([*base, a.name])) for a in node.names)
    return sorted(found)  # ast.walk is breadth-first: report in line order


def layer_of(module: str) -> str | None:
    """The layer of a dotted module name: ``acidstream.txn.store`` is ``txn``, ``acidstream.cli``
    and ``acidstream`` are ``acidstream``; None for a module outside the project."""
    parts = module.split(".")
    if parts[0] != "acidstream":
        return None
    if len(parts) > 1 and parts[1] in RANK and parts[1] != "acidstream":
        return parts[1]
    return "acidstream"


def violations(source: str, module: str, is_package: bool, where: str) -> list[Arrow]:
    """The imports of one module that point up or sideways in the layer rule."""
    own = layer_of(module)
    assert own is not None, module
    bad = []
    for line, imported in imported_modules(source, module, is_package):
        top = layer_of(imported)
        if top is None or top == own:
            continue  # third-party, stdlib, or the module's own package
        if RANK[top] >= RANK[own]:
            bad.append(Arrow(f"{where}:{line}", module, imported))
    return bad


def project_modules() -> list[Path]:
    """Every .py file of the ``acidstream`` package (sub-packages included)."""
    return [f for f in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in f.parts]


def test_every_import_follows_the_layer_rule() -> None:
    files = project_modules()
    # Guard against a walk that finds nothing (a moved root, a renamed package).
    assert {layer_of(module_name(f, ROOT)[0]) for f in files} == set(RANK)
    bad: list[Arrow] = []
    for f in files:
        module, is_package = module_name(f, ROOT)
        bad += violations(f.read_text(), module, is_package, str(f.relative_to(ROOT)))
    assert not bad, "imports against the layer rule:\n" + "\n".join(map(str, bad))


def test_the_check_flags_upward_sideways_and_nested_imports() -> None:
    # A synthetic module in ingest/ with one import of each kind the walk must see.
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import json\n"
        "from acidstream.acid.errors import ConfigError\n"  # down: allowed
        "from acidstream.txn.store import open_store\n"  # down: allowed
        "from .record_json import StrictJsonWriter\n"  # own package: allowed
        "import acidstream.recovery.housekeeper\n"  # sideways, module level
        "if TYPE_CHECKING:\n"
        "    from acidstream.sources.kafka import KafkaSource\n"  # sideways, TYPE_CHECKING
        "def f() -> None:\n"
        "    from acidstream.sinks import foreach_batch\n"  # up, inside a function
        "class C:\n"
        "    import acidstream.cli.main\n"  # up, inside a class
        "from .. import compaction\n"  # relative, sideways: the name is the package
        "from ..compaction.worker import Worker\n"  # relative, sideways
    )
    m = "acidstream.ingest.synthetic"
    bad = violations(source, m, False, "ingest/synthetic.py")
    assert [str(a) for a in bad] == [
        f"ingest/synthetic.py:7 {m} -> acidstream.recovery.housekeeper",
        f"ingest/synthetic.py:9 {m} -> acidstream.sources.kafka",
        f"ingest/synthetic.py:11 {m} -> acidstream.sinks",
        f"ingest/synthetic.py:13 {m} -> acidstream.cli.main",
        f"ingest/synthetic.py:14 {m} -> acidstream.compaction",
        f"ingest/synthetic.py:15 {m} -> acidstream.compaction.worker",
    ]
    # A facade module may import any layer; a layer may not import the facade package itself.
    assert violations("import acidstream.sinks\n", "acidstream.cli.main", False, "x") == []
    assert [a.imported for a in violations("import acidstream\n", m, False, "x")] == ["acidstream"]


def test_relative_imports_resolve_against_the_package() -> None:
    # In a package's __init__, "." is the package itself; in a module, its parent.
    assert imported_modules("from .app import x\n", "acidstream.ingest.http", True) == [
        (1, "acidstream.ingest.http.app")
    ]
    assert imported_modules("from .app import x\n", "acidstream.ingest.http.server", False) == [
        (1, "acidstream.ingest.http.app")
    ]
    assert imported_modules("from ..txn import store\n", "acidstream.acid.reader", False) == [
        (1, "acidstream.txn")
    ]
    # acid importing txn through a relative import is an upward arrow.
    bad = violations("from ..txn import store\n", "acidstream.acid.reader", False, "acid/reader.py")
    assert [str(a) for a in bad] == ["acid/reader.py:1 acidstream.acid.reader -> acidstream.txn"]
