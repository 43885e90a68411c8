"""The shape of the package: wings without import cycles, a facade nothing below imports,
one writer per table, and a contract at the top of every module.

The import graph counts every import — at module level, under ``TYPE_CHECKING`` and inside
functions — because a lazy import hides a cycle from Python, not from the reader.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

import memstrata

ROOT = Path(memstrata.__file__).parent
PKG = "memstrata"
#: Modules that may import the facade: the interfaces around it and the package itself.
ABOVE_FACADE = ("memstrata", "memstrata.memory", "memstrata.cli", "memstrata.interfaces",
                "memstrata.bench")
#: Deprecated one-release shims of the flat layout (they only re-export).
SHIMS = {"memstrata.embeddings", "memstrata.injection", "memstrata.sensitivity",
         "memstrata.tools"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports(mod: str) -> set[str]:
    path = MODULES[mod]
    tree = ast.parse(path.read_text("utf-8"))
    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    out: set[str] = set()

    def resolve(name: str) -> str | None:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        return name or None

    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                prefix = ".".join(anchor + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            targets = [f"{prefix}.{a.name}" for a in node.names] + [prefix]
        for t in targets:
            r = resolve(t)
            if r and r != mod:
                out.add(r)
    return out


GRAPH = {m: imports(m) for m in MODULES}


def cycles() -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_counting_lazy_and_type_checking_imports() -> None:
    assert cycles() == []


def test_nothing_below_the_facade_imports_it() -> None:
    below = [m for m, deps in GRAPH.items() if "memstrata.memory" in deps
             and not m.startswith(ABOVE_FACADE)]
    assert below == []


def test_the_guards_themselves_see_a_cycle() -> None:
    """The import reader finds a function-local import (the kind that hides a cycle)."""
    assert "memstrata.memory" in GRAPH["memstrata.interfaces.demo"]
    assert "memstrata.providers.embeddings" in GRAPH["memstrata.memory"]  # lazy, in a function


@pytest.mark.parametrize("wing", ["layers", "governance", "retrieval", "extraction",
                                  "providers", "store"])
def test_wings_below_the_facade_never_reach_the_interfaces(wing: str) -> None:
    offenders = {m: sorted(d for d in deps if d.startswith(("memstrata.interfaces",
                                                              "memstrata.cli")))
                 for m, deps in GRAPH.items() if m.startswith(f"memstrata.{wing}")}
    assert {m: d for m, d in offenders.items() if d} == {}


def test_governance_never_writes_and_store_never_reaches_the_layers() -> None:
    for m, deps in GRAPH.items():
        if m.startswith("memstrata.store"):
            assert not {d for d in deps if d.startswith(("memstrata.layers",
                                                         "memstrata.retrieval",
                                                         "memstrata.extraction"))}, m
        if m.startswith("memstrata.governance"):
            assert not {d for d in deps if d.startswith(("memstrata.layers",
                                                         "memstrata.store"))}, m


def test_every_module_opens_with_a_docstring() -> None:
    missing = [m for m, p in MODULES.items()
               if ast.get_docstring(ast.parse(p.read_text("utf-8"))) is None]
    assert missing == []


# -- one writer per table ----------------------------------------------------------------

#: Tables of records: exactly one module writes each.
RECORD_TABLES = {
    "facts": "memstrata.layers.facts",
    "episodes": "memstrata.layers.episodes",
    "checkpoints": "memstrata.layers.checkpoints",
    "operations": "memstrata.layers.ledger",
    "runs": "memstrata.layers.runs",
    "scratch": "memstrata.layers.scratch",
    "feedback": "memstrata.layers.feedback",
    "procedures": "memstrata.layers.procedures",
    "api_keys": "memstrata.interfaces.service.keys",
}
#: Tables of an engine: written only inside ``store/`` (one module per engine each).
ENGINE_TABLES = {"vectors", "meta", "tenants", "write_guard", "migrations", "facts_fts",
                 "episodes_fts", "fts_rewrites"}
#: Where the schema is defined (DDL and triggers name every table), and the LoCoMo bench's
#: baselines, which index into an in-memory database of their own.
SCHEMA = {"memstrata.store.sqlite_schema", "memstrata.store.pg_schema",
          "memstrata.bench.locomo_retrievers"}
_NAME = r"(\{?[A-Za-z_][A-Za-z0-9_]*\}?(?:_fts)?)"
#: SQL is written in upper-case keywords here; prose never reads "UPDATE x SET".
_WRITE = re.compile(rf"\b(?:INSERT\s+(?:OR\s+[A-Z]+\s+)?INTO\s+{_NAME}|DELETE\s+FROM\s+{_NAME}|"
                    rf"UPDATE\s+{_NAME}\s+SET)")


def sql_writes(mod: str) -> set[str]:
    """Tables the module's string literals (f-strings included) write to."""
    tree = ast.parse(MODULES[mod].read_text("utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{x}"
                           for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        for groups in _WRITE.findall(text):
            found |= {g.lower() for g in groups if g}
    return found


WRITERS: dict[str, set[str]] = defaultdict(set)
for _mod in MODULES:
    if _mod not in SCHEMA:
        for _table in sql_writes(_mod):
            WRITERS[_table].add(_mod)


def test_each_record_table_is_written_by_exactly_one_module() -> None:
    assert {t: sorted(WRITERS[t]) for t in RECORD_TABLES} == {
        t: [owner] for t, owner in RECORD_TABLES.items()}


def test_engine_tables_are_written_only_inside_the_store() -> None:
    for table in ENGINE_TABLES:
        outside = {m for m in WRITERS[table] if not m.startswith("memstrata.store.")}
        assert outside == set(), table
        for engine in ("sqlite", "pg"):
            mods = {m for m in WRITERS[table] if m.split(".")[-1].startswith(engine)}
            assert len(mods) <= 1 or table.endswith("_fts"), (table, mods)


def test_no_sql_writes_to_unknown_tables() -> None:
    """Every written name is a known table (or an f-string table name in an engine)."""
    known = set(RECORD_TABLES) | ENGINE_TABLES | {"{x}", "{x}_fts"}
    unknown = {t: sorted(m) for t, m in WRITERS.items() if t not in known}
    assert unknown == {}
    dynamic = WRITERS["{x}"] | WRITERS["{x}_fts"]
    assert all(m.startswith("memstrata.store.") for m in dynamic), dynamic


def test_the_owner_guard_sees_a_write() -> None:
    assert "facts" in sql_writes("memstrata.layers.facts")
    assert "memstrata.layers.feedback" in WRITERS["feedback"]


def test_no_sql_branches_on_the_engine_outside_the_store() -> None:
    for m, path in MODULES.items():
        if m.startswith("memstrata.store") or m in SHIMS:
            continue
        text = path.read_text("utf-8")
        assert ".dialect" not in text and ".engine ==" not in text, m
        assert 'getattr(db, "' not in text and "getattr(self._db" not in text, m


def test_an_engine_registered_by_scheme_serves_memory_open(tmp_path: Path) -> None:
    """The built-in engines use the same registry a third party's engine would."""
    from memstrata import Memory, Scope, register_engine
    from memstrata.store.engines import engine_schemes
    from memstrata.store.sqlite import SQLiteDatabase

    opened: list[str] = []

    def factory(url: str, **options: object) -> SQLiteDatabase:
        opened.append(url)
        return SQLiteDatabase(tmp_path / (url.split("://", 1)[1] + ".db"))

    register_engine("mystore", factory, replace=True)
    assert {"sqlite", "postgresql", "mystore"} <= set(engine_schemes())
    with Memory.open("mystore://alpha", embedder=None) as mem:
        mem.episodes.append(Scope(user="u"), text="through a registered engine",
                            actor="user", source="s")
        assert mem.db.capabilities.secure_delete
        assert len(mem.episodes.search(Scope(user="u"), "registered engine")) == 1
    assert opened == ["mystore://alpha"] and (tmp_path / "alpha.db").exists()
    with pytest.raises(memstrata.ConfigError, match="no engine serves"):
        Memory.open("nosuch://x", embedder=None)
