"""The curated public surface: sorted, complete, importable, and light to import."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import memstrata


def test_all_is_sorted_and_every_name_resolves() -> None:
    names = list(memstrata.__all__)
    assert names == sorted(names)
    for name in names:
        assert getattr(memstrata, name) is not None, name


def test_exception_tree_has_one_base_and_no_builtin_shadow() -> None:
    errors = [getattr(memstrata, n) for n in memstrata.__all__
              if isinstance(getattr(memstrata, n), type)
              and issubclass(getattr(memstrata, n), BaseException)]
    assert all(issubclass(e, memstrata.MemstrataError) for e in errors)
    assert all(issubclass(e, Exception) for e in errors)
    assert "MemoryError" not in memstrata.__all__


def test_import_does_not_load_heavy_modules() -> None:
    code = ("import sys, memstrata; heavy = [m for m in ('onnxruntime', 'tokenizers', 'mcp', "
            "'psycopg', 'redis', 'httpx') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def _memstrata_types(annotation: object) -> set[type]:
    """Classes defined in memstrata that an annotation names (generics unpacked)."""
    import typing

    out: set[type] = set()
    stack = [annotation]
    while stack:
        item = stack.pop()
        if isinstance(item, type) and item.__module__.startswith("memstrata"):
            out.add(item)
        stack.extend(typing.get_args(item))
    return out


def _namespace() -> dict[str, object]:
    """Every name of every memstrata module (annotations may name TYPE_CHECKING imports)."""
    import importlib
    import pkgutil
    import sys as _sys

    for info in pkgutil.walk_packages(memstrata.__path__, "memstrata."):
        if info.name.split(".")[-1] not in ("embeddings", "injection", "sensitivity", "tools") \
                or "." in info.name.removeprefix("memstrata."):
            importlib.import_module(info.name)
    names: dict[str, object] = {}
    for name, module in list(_sys.modules.items()):
        if name.startswith("memstrata") and module is not None:
            names.update({k: v for k, v in vars(module).items() if isinstance(v, type)})
    return names


def _surface() -> dict[str, object]:
    """The objects a user reaches from ``Memory``: the facade, a run and every layer."""
    import tempfile

    mem = memstrata.Memory.open(f"sqlite:///{tempfile.mkdtemp()}/api.db", embedder=None)
    try:
        run = mem.run(memstrata.Scope(user="u"))
        return {"Memory": mem, "Run": run, "scratch": run.scratch, "checkpoint": run.checkpoint,
                "ledger": run.ledger, **{name: getattr(mem, name) for name in (
                    "facts", "review", "episodes", "checkpoints", "ledger", "procedures")}}
    finally:
        mem.close()


def test_every_type_the_api_returns_or_takes_is_public() -> None:
    """``__all__`` is complete: whatever a public method returns or takes, and the layer
    objects reached as attributes of ``Memory``, can be imported from ``memstrata``."""
    import inspect
    import typing

    from memstrata.store.base import Tx

    public = {getattr(memstrata, n) for n in memstrata.__all__}
    missing: dict[str, set[str]] = {}
    for owner, obj in _surface().items():
        if type(obj) not in public:
            missing.setdefault(owner, set()).add(type(obj).__name__)
        for name, member in inspect.getmembers(type(obj), callable):
            if name.startswith("_"):
                continue
            hints = typing.get_type_hints(member, localns=_namespace())
            if any(h is Tx for h in hints.values()):
                continue  # the layers' transaction seam, for their siblings (forget, review)
            for hint in hints.values():
                for cls in _memstrata_types(hint):
                    if cls not in public:
                        missing.setdefault(f"{owner}.{name}", set()).add(cls.__name__)
    assert missing == {}, sorted((k, sorted(v)) for k, v in missing.items())


def test_no_public_name_is_left_out_of_all() -> None:
    """Names the package exposes that are neither in ``__all__`` nor submodules."""
    import types

    exposed = {n for n in dir(memstrata) if not n.startswith("_")
               and not isinstance(getattr(memstrata, n), types.ModuleType)}
    assert exposed == set(memstrata.__all__) - {"__version__"}


def test_the_old_flat_module_paths_still_import_with_a_warning() -> None:
    """A one-release shim for every submodule path the docs or examples named."""
    import importlib
    import warnings

    for old, new in (("tools", "interfaces.tools"), ("embeddings", "providers.embeddings"),
                     ("sensitivity", "governance.sensitivity"),
                     ("injection", "governance.injection")):
        import sys as _sys

        _sys.modules.pop(f"memstrata.{old}", None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            shim = importlib.import_module(f"memstrata.{old}")
        target = importlib.import_module(f"memstrata.{new}")
        assert any(issubclass(w.category, DeprecationWarning) for w in caught), old
        assert all(getattr(shim, n) is getattr(target, n) for n in target.__all__)


def test_a_scope_built_directly_refuses_bad_fields_with_memstrata_s_error() -> None:
    import pytest

    for fields in ({"user": "al\x00ice"}, {"project": 5}, {"tenant": ""}, {"team": "x"}):
        with pytest.raises(memstrata.ValidationError) as err:
            memstrata.Scope(**fields)
        assert err.value.hint and "nothing was stored" in err.value.hint
    assert memstrata.Scope(user="alice", project="p").key == "u=alice;p=p;a="


def test_the_entry_points_refuse_bad_arguments_with_memstrata_s_errors(tmp_path: Any) -> None:
    """Memory.open, PolicyConfig, Transcript and a procedure's next step take only what they
    document, each refusal a typed error with a hint (before: raw TypeError, ValueError or
    UnicodeEncodeError from the URL, an AttributeError at the first write for a clock or a
    policy of the wrong type, a NaN or negative min_confidence that turned the confidence
    check off, a tenant list that failed in the driver)."""
    import pytest

    from memstrata import Memory, MemstrataError, PolicyConfig
    from memstrata.interfaces.transcript import Transcript

    url = f"sqlite:///{tmp_path / 'm.db'}"
    bad_opens: list[dict[str, Any]] = [
        {"url": 5}, {"url": "a\x00b"}, {"url": "sqlite:///tmp/\ud800.db"}, {"url": b"x.db"},
        {"url": url, "clock": 5}, {"url": url, "policy": 5}, {"url": url, "tenant": ["acme"]},
        {"url": url, "tenant": ""}, {"url": url, "tenant": "a\x00b"}]
    for options in bad_opens:
        with pytest.raises(MemstrataError) as err:
            Memory.open(embedder=None, **options).close()
        assert err.value.hint, options
    for value in (float("nan"), -1, "0.7", 5, True):
        with pytest.raises(memstrata.ValidationError):
            PolicyConfig(min_confidence=value)
    with pytest.raises(memstrata.ValidationError):
        PolicyConfig(secrets="drop")  # type: ignore[arg-type]
    for options in ({"budget_tokens": None}, {"budget_tokens": float("nan")},
                    {"keep_last": 0}, {"observation_cap": "10"}):
        with pytest.raises(memstrata.ValidationError):
            Transcript(**options)
    with Memory.open(url, embedder=None, tenant=None) as mem:  # None: the default tenant
        assert mem.default_tenant == "default"
        with pytest.raises(memstrata.ValidationError):
            mem.procedures.next_step("deploy", None)  # type: ignore[arg-type]


def test_every_public_model_refuses_a_bad_field_with_memstratas_error() -> None:
    """Each pydantic model memstrata exports refuses a field of the wrong type (given to the
    constructor, or assigned) with memstrata's ValidationError naming the field, with a hint:
    EpisodeInput, Procedure and Provenance raised pydantic's own error before."""
    import pydantic
    import pytest

    import memstrata

    models = [getattr(memstrata, name) for name in memstrata.__all__
              if isinstance(getattr(memstrata, name), type)
              and issubclass(getattr(memstrata, name), pydantic.BaseModel)]
    assert {m.__name__ for m in models} >= {"EpisodeInput", "Procedure", "Provenance", "Scope",
                                            "Fact", "Hit"}
    for model in models:
        with pytest.raises(memstrata.ValidationError) as refused:
            model(no_such_field_anywhere=1)
        assert "no_such_field_anywhere" in str(refused.value) and refused.value.hint
    with pytest.raises(memstrata.ValidationError, match="actor"):
        memstrata.Provenance(actor="robot", source="chat:1")
    prov = memstrata.Provenance(actor="user", source="chat:1")
    with pytest.raises(memstrata.ValidationError, match="actor"):
        prov.actor = "robot"  # type: ignore[assignment]
    assert prov.actor == "user"


def test_a_bad_field_of_a_nested_model_is_named_by_its_path_once() -> None:
    """A model inside another (a procedure's case, its expectation) that refuses a field is
    reported as one problem with its whole path and one hint, not as the inner error's text
    (with its hint) inside the outer one's."""
    import pytest

    import memstrata

    with pytest.raises(memstrata.ValidationError) as refused:
        memstrata.Procedure(name="deploy", owner="alice",
                            steps=[{"name": "build", "text": "build it"}],
                            cases=[{"expect": {"next": "deploy"}}])
    err = refused.value
    assert err.details["problems"] == ["cases.0.expect.next: Extra inputs are not permitted"]
    assert str(err).count("nothing was stored") == 1
