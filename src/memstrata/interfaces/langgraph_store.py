"""A LangGraph ``BaseStore`` on memstrata's durable facts (``pip install 'memstrata[langgraph]'``).

LangGraph agents keep long-term memory in a store: JSON documents at ``(namespace, key)``
with ``put`` / ``get`` / ``search`` / ``delete`` / ``list_namespaces`` (sync and async,
batched) and an optional time-to-live. :class:`MemstrataStore` keeps each item as a memstrata
fact, so items get what facts get: scope isolation, the write policy (a secret is refused,
personal data is restricted and waits for review, an agent's writes wait for a person when
the store writes as ``agent``), a history for every overwrite (supersession), the gate's
hybrid ranker for ``search(query=...)``, expiry, and ``Memory.forget``.

Mapping (a contract; the tests check every line):

- **Namespace → scope.** The leading elements named by ``scope_keys`` fill the scope's
  fields (default ``("user",)``: ``("alice", "memories")`` is user ``alice``); ``None`` in
  ``scope_keys`` marks a label position (``(None, "user")`` reads LangMem's
  ``("memories", "{user_id}")``). The store's own ``scope`` gives the tenant and any fixed
  field. The other elements are *labels*. A namespace shorter than ``scope_keys`` is a
  :class:`~memstrata.errors.ValidationError`. An element in a scope position that is no
  valid scope name (a space, a character scope names do not take, over 128 characters:
  ``"John Smith"``) is the scope name ``lg=`` and a 160-bit digest of it; ids such as
  ``auth0|5f7c...`` are valid names and stay as they are.
- **(namespace, key) → the fact's slot**: subject ``lg.<element>.<element>`` (the whole
  namespace, so stores of different layouts never share a slot), attribute ``<key>``. An
  element or key that the slot's normal form would change (case, spaces, length) carries a
  digest of its exact text, so ``"Key"`` and ``"key"`` stay two items.
- **Value → evidence.** The exact JSON of the item (at most 8,000 characters with its
  envelope; larger values are refused: keep documents elsewhere and store a reference) is
  the fact's evidence; the claim is the text of the indexed fields (``index`` paths, as in
  LangGraph; default the whole value), which is what search ranks and what the policy
  screens.
- **put** on an existing key makes a new version that supersedes the old one (history
  kept, ``created_at`` kept); an equal value changes nothing. **put None / delete** retires
  the item (history kept; ``on_delete="forget"`` erases it with its history). The last put
  or delete wins: the item's earlier puts still waiting for review are withdrawn (a
  model's store withdraws its own), so approving one never brings back an older value or
  a deleted item. Any string is a key, ``""`` too.
  **ttl** (minutes) sets ``expires_at``, refreshed by reads unless ``refresh_ttl=False``;
  an expired item is never returned, even before a sweep.
- **search**: the items under the namespace prefix, which must name every scope position
  (a search never spans users), filtered by ``filter`` (exact values, nested dicts,
  ``$eq $ne $gt $gte $lt $lte``); with a ``query`` they are ranked by the gate's ranker
  (``score`` 0..1; the newest 5,000 items of the prefix are ranked; an item the ranker finds
  no evidence for, lexical or semantic, is left out; items written with ``index=False``
  follow, unscored), else newest first. ``index`` takes paths (``["content"]``) or
  LangGraph's ``IndexConfig`` (its ``fields``; the embedder is memstrata's own). Every
  string of a value is screened: one holding a secret is refused.
- **list_namespaces**: the namespaces of the items the store's scope owns, sorted, with
  ``prefix`` / ``suffix`` conditions (``"*"`` wildcards), ``max_depth``, ``limit``,
  ``offset``.
- **Paging**: ``limit`` and ``offset`` (of ``search`` and ``list_namespaces``) are ints, 0
  or more, and ``max_depth`` is None or 1 or more: anything else (a string, None, a float,
  a negative number that a slice would count from the end, a depth of 0 that would list
  the empty namespace) is a :class:`~memstrata.errors.ValidationError` naming the argument.
- Operations of a batch run in order; a later operation sees an earlier put.

Writes are made as ``actor`` (default ``"system"``: the application's own code). Pass
``actor="agent"`` when a model decides what is written: its writes then wait for a person's
review (``memstrata review``) and stay invisible to ``get`` and ``search`` until approved;
its delete withdraws its own waiting proposals of the item and refuses to delete a current
item (AccessDenied: a delete cannot wait for a person). A write the policy rejects
raises :class:`~memstrata.errors.PolicyRejected` and changes nothing; one sent to review is
logged (logger ``memstrata.langgraph``).
``abatch`` runs the batch in a worker thread (the engines are thread-safe).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import AccessDenied, ConfigError, PolicyRejected, ValidationError

try:
    from langgraph.store.base import (
        NOT_PROVIDED,
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        get_text_at_path,
    )
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigError("the LangGraph store needs langgraph",
                      hint="pip install 'memstrata[langgraph]'") from exc

from ..governance.sensitivity import scan
from ..inputs import MAX_CLAIM, MAX_NAME, MAX_SOURCE, MAX_TEXT, check_name, int_arg
from ..layers.scratch import MAX_TTL
from ..models import FACT_KINDS, Fact, Scope, make_scope
from ..store.sql import json_strings
from .langgraph_filters import check_filter, matches

if TYPE_CHECKING:
    from ..memory import Memory

log = logging.getLogger("memstrata.langgraph")

#: Subject prefix of every item of the store (a label never contains ".").
ROOT = "lg"
SCOPE_FIELDS = ("user", "project", "agent")
#: The longest time-to-live a put takes, in minutes: the scratchpad's longest, a century (a
#: date past it is no date).
MAX_TTL_MINUTES = MAX_TTL // timedelta(minutes=1)
#: How many items of a namespace prefix a search reads (newest first; a larger prefix is
#: logged), and how many of them a query ranks.
MAX_ITEMS = 100_000
MAX_RANKED = 5000
_HEAD = MAX_NAME - 30


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _label(text: str) -> str:
    """A label or key in slot form; a digest of the exact text when the form changes it (or
    the text is empty: LangGraph allows the key ``""``)."""
    norm = " ".join(text.lower().split())  # the slot's normal form (SlotText)
    if text and norm == text and "~" not in text and len(text) <= _HEAD:
        return text
    return f"{norm[:_HEAD - 13]}~{_digest(text)}"


def _scope_name(element: str) -> str:
    """The scope name a namespace element in a scope position stands for: itself when it is
    a valid one, else ``lg=`` and a 160-bit digest of its exact text (a user id with a space
    or another character scope names do not take, or over 128 characters), so any label
    LangGraph takes names a user of its own; the item keeps the element as given."""
    try:
        if check_name(element, "name") == element:
            return element
    except ValueError:
        pass
    return "lg=" + hashlib.sha256(element.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def _subject(labels: Sequence[str]) -> str:
    """The subject of a namespace (a path too long for a subject keeps the labels that fit
    and a digest of the rest; prefix searches cut theirs the same way)."""
    parts = [ROOT]
    for i, label in enumerate(labels):
        if len(".".join([*parts, _label(label)])) > _HEAD:
            return ".".join(parts) + f".~{_digest(json.dumps(list(labels[i:])))}"
        parts.append(_label(label))
    return ".".join(parts)


def _prefix_subject(labels: Sequence[str]) -> str:
    parts = [ROOT]
    for label in labels:
        if len(".".join([*parts, _label(label)])) > _HEAD:
            break
        parts.append(_label(label))
    return ".".join(parts)


class NamespaceError(ValidationError, InvalidNamespaceError):
    """A namespace LangGraph or memstrata cannot take (both libraries' error types)."""


def _check_labels(namespace: Any, what: str = "namespace") -> tuple[str, ...]:
    if not isinstance(namespace, tuple | list):
        raise NamespaceError(f"{what} must be a tuple of strings",
                             hint='e.g. ("alice", "memories")')
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise NamespaceError(
                f"invalid {what} label {label!r} in {tuple(namespace)!r}",
                hint="labels are non-empty strings without '.' or NUL")
    return tuple(namespace)


def _check_root(namespace: Any) -> tuple[str, ...]:
    checked = _check_labels(namespace)
    if not checked:
        raise NamespaceError("a namespace cannot be empty", hint='e.g. ("alice", "memories")')
    if checked[0] == "langgraph":
        raise NamespaceError('the root label of a namespace cannot be "langgraph"')
    return checked


def _render(value: Any) -> str:
    """Readable text of a JSON value: what a claim made of the whole item says."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {_render(v)}" for k, v in value.items() if v not in (None, ""))
    if isinstance(value, list | tuple):
        return ", ".join(_render(v) for v in value)
    return json.dumps(value, ensure_ascii=False)


def _not_json(key: str, exc: Exception) -> ValidationError:
    return ValidationError(f"the value of {key!r} is not JSON: {exc}",
                           hint="store JSON types only (str, number, bool, None, list, dict)")


def _clip(text: str, limit: int = MAX_CLAIM) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1].rsplit(" ", 1)[0]
    return cut + "…"


def _page(value: Any, field: str, call: str) -> int:
    """A ``limit`` or ``offset``: a whole number, 0 or more (LangGraph slices with them, and a
    slice would count a negative one from the end)."""
    return int_arg(value, f"{call} {field}", low=0)


def _depth(value: Any) -> int | None:
    """``max_depth``: None (whole namespaces) or a depth of 1 or more."""
    return None if value is None else int_arg(value, "list_namespaces max_depth", low=1)


def _matches(namespace: tuple[str, ...], cond: MatchCondition) -> bool:
    path = tuple(cond.path)
    if len(namespace) < len(path):
        return False
    pairs = (zip(namespace, path, strict=False) if cond.match_type == "prefix" else
             zip(reversed(namespace), reversed(path), strict=False))
    if cond.match_type not in ("prefix", "suffix"):
        raise ValidationError(f"unsupported match type {cond.match_type!r}",
                              hint='use "prefix" or "suffix"')
    return all(p == "*" or n == p for n, p in pairs)


class MemstrataStore(BaseStore):
    """LangGraph's ``BaseStore`` over memstrata facts (see the module docstring)."""

    supports_ttl = True

    def __init__(self, mem: Memory, *, scope: Scope | dict[str, Any] | None = None,
                 scope_keys: Sequence[str | None] = ("user",), actor: str = "system",
                 kind: str = "profile", index: Sequence[str] | Mapping[str, Any] | None = None,
                 ttl: TTLConfig | None = None, on_delete: str = "retire",
                 source: str = "langgraph") -> None:
        self.mem = mem
        self.scope = make_scope(scope or {})
        keys = tuple(scope_keys)
        named = [k for k in keys if k is not None]
        if any(k not in SCOPE_FIELDS for k in named) or len(set(named)) != len(named):
            raise ValidationError(f"scope_keys must name distinct fields of {SCOPE_FIELDS} "
                                  f"(or None for a label), not {keys!r}")
        fixed = [k for k in named if getattr(self.scope, k) is not None]
        if fixed:
            raise ValidationError(f"scope field(s) {fixed} are fixed by the store's scope and "
                                  "named by scope_keys too", hint="drop them from one")
        if kind not in FACT_KINDS:
            raise ValidationError(f"kind must be one of {', '.join(FACT_KINDS)}")
        if on_delete not in ("retire", "forget"):
            raise ValidationError('on_delete must be "retire" or "forget"')
        self.scope_keys = keys
        self.actor = actor
        self.kind = kind
        if isinstance(index, Mapping):  # LangGraph's IndexConfig: {"fields": [...], ...}
            index = index.get("fields")
        self.index = list(index) if index is not None else None
        self.ttl_config = ttl
        self.on_delete = on_delete
        self.source = source

    # -- mapping ------------------------------------------------------------
    def _split(self, namespace: tuple[str, ...], *,
               partial: bool = False) -> tuple[Scope, tuple[str, ...]]:
        """The scope and the labels of a namespace (``partial``: a search prefix, which
        must still name every scope position)."""
        if len(namespace) < len(self.scope_keys):
            what = "search prefix" if partial else "namespace"
            names = ", ".join(k or "label" for k in self.scope_keys)
            raise ValidationError(
                f"the {what} {namespace!r} does not name the scope: the store reads its first "
                f"{len(self.scope_keys)} element(s) as ({names})",
                hint="a search never spans users; name them, e.g. "
                     f"{tuple(k or 'memories' for k in self.scope_keys)!r}")
        fields = self.scope.model_dump()
        labels: list[str] = []
        for i, label in enumerate(namespace):
            key = self.scope_keys[i] if i < len(self.scope_keys) else None
            if key is None:
                labels.append(label)
            elif label != label.strip():
                # a scope name is stored stripped: ("alice ",) would read and write alice's
                raise NamespaceError(
                    f"namespace {namespace!r}: the {key} {label!r} has spaces around it",
                    hint=f"name the {key} without them: {label.strip()!r}")
            else:
                fields[key] = _scope_name(label)
        try:
            return Scope(**fields), tuple(labels)
        except Exception as exc:  # pydantic: a label that is no valid scope name
            raise ValidationError(f"namespace {namespace!r} does not make a valid scope: "
                                  f"{exc}") from None

    @staticmethod
    def _envelope(fact: Fact) -> dict[str, Any] | None:
        try:
            env = json.loads(fact.provenance.evidence or "")
        except ValueError:
            return None
        return env if isinstance(env, dict) and "lg" in env else None

    def _item(self, fact: Fact, env: dict[str, Any], score: float | None = None,
              searched: bool = False) -> Item:
        created = datetime.fromisoformat(env["created_at"])
        kwargs = {"value": env["value"], "key": env["key"], "namespace": tuple(env["ns"]),
                  "created_at": created, "updated_at": fact.created_at or created}
        if searched:
            return SearchItem(**kwargs, score=score)
        return Item(**kwargs)

    def _claim(self, value: Mapping[str, Any], key: str, index: Any) -> tuple[str, bool]:
        paths = self.index if index is None else index
        if paths is False:
            return _clip(key), False
        if not paths or paths == ["$"]:
            text = _render(value)
        else:
            text = " ".join(t for p in paths for t in get_text_at_path(dict(value), p))
        return _clip(text or key), True

    # -- the operations -----------------------------------------------------
    def put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
            index: Any = None, *, ttl: Any = NOT_PROVIDED) -> None:
        """LangGraph's ``put``, with memstrata's typed errors for a bad namespace."""
        _check_root(namespace)
        super().put(namespace, key, value, index, ttl=ttl)

    async def aput(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
                   index: Any = None, *, ttl: Any = NOT_PROVIDED) -> None:
        """LangGraph's ``aput``, with memstrata's typed errors for a bad namespace."""
        _check_root(namespace)
        await super().aput(namespace, key, value, index, ttl=ttl)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order (see the module docstring)."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise ValidationError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _current(self, namespace: tuple[str, ...], key: str) -> tuple[Scope, Fact | None]:
        scope, _ = self._split(_check_labels(namespace))
        found = self.mem.facts.in_namespace(scope, _subject(namespace), attribute=_label(key),
                                            limit=1)
        return scope, (found[0] if found else None)

    def _refresh(self, scope: Scope, pairs: Sequence[tuple[Fact, dict[str, Any]]],
                 refresh: bool | None) -> None:
        if refresh is None:
            refresh = (self.ttl_config or {}).get("refresh_on_read", True)
        if not refresh:
            return
        now = self.mem.clock.now()
        until = {f.id: now + timedelta(minutes=float(env["ttl"])) for f, env in pairs
                 if env.get("ttl") is not None}
        if until:
            self.mem.facts.extend_expiry(scope, until)

    def _get(self, op: GetOp) -> Item | None:
        if not isinstance(op.key, str):
            raise ValidationError("key must be a string")
        scope, fact = self._current(op.namespace, op.key)
        env = self._envelope(fact) if fact is not None else None
        if fact is None or env is None:
            return None
        self._refresh(scope, [(fact, env)], op.refresh_ttl)
        return self._item(fact, env)

    def _put(self, op: PutOp) -> None:
        key = op.key
        if not isinstance(key, str):
            raise ValidationError("key must be a string")
        namespace = _check_root(op.namespace)
        scope, current = self._current(namespace, key)
        if op.value is None:
            self._delete(scope, namespace, key, current)
            return
        if not isinstance(op.value, Mapping):
            raise ValidationError("value must be a mapping (a JSON object) or None")
        ttl = op.ttl  # BaseStore.put has applied the TTLConfig default; None: no expiry
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float)
                                or not 0 < ttl <= MAX_TTL_MINUTES):  # NaN is no number here
            raise ValidationError("ttl must be a positive number of minutes or None",
                                  hint=f"at most {MAX_TTL_MINUTES} (a century)")
        value = dict(op.value)
        leaked = sorted({f.detector for text in json_strings(value, keys=True)
                         for f in scan(text).secrets})
        if leaked:
            raise PolicyRejected(
                f"put {key!r} refused: the value contains a secret ({', '.join(leaked)}): "
                "secrets are never stored", hint="keep it in a secret manager and store a "
                                                 "reference; nothing was written")
        old = self._envelope(current) if current is not None else None
        now = self.mem.clock.now()
        env = {"lg": 1, "ns": list(namespace), "key": key, "value": value,
               "created_at": old["created_at"] if old else now.isoformat(), "ttl": ttl}
        try:
            claim, indexed = self._claim(value, key, op.index)
        except TypeError as exc:  # a leaf json cannot render
            raise _not_json(key, exc) from None
        env["indexed"] = indexed
        if old is not None and old["value"] == value and old.get("ttl") == ttl and \
                old.get("indexed", True) == indexed:
            assert current is not None
            self._refresh(scope, [(current, old)], True)
            # the value stays the current one: a put of another still waiting is withdrawn
            self._withdraw(scope, namespace, key, keep=None, why="replaced by a later put")
            return
        try:  # the one serialisation of the item, which is also its JSON check
            evidence = json.dumps(env, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise _not_json(key, exc) from None
        if len(evidence) > MAX_TEXT:
            raise ValidationError(
                f"the item {key!r} is {len(evidence)} characters as JSON; a memstrata item "
                f"holds at most {MAX_TEXT}", hint="keep documents elsewhere and store a "
                                                  "short summary with a reference")
        source = f"{self.source}:{'/'.join(namespace)}/{key}"[:MAX_SOURCE]
        res = self.mem.facts.propose(
            scope, claim=claim, kind=self.kind, subject=_subject(namespace),
            attribute=_label(key), actor=self.actor, source=source, evidence=evidence,
            expires_at=now + timedelta(minutes=float(ttl)) if ttl is not None else None,
            reason="rewritten through the LangGraph store" if current is not None else None,
            dedup="off")
        if res.status == "rejected":
            raise PolicyRejected(f"put {key!r} refused: {res.reason}",
                                 hint="nothing was written")
        # the last put wins: an earlier one still waiting for review is withdrawn, so its
        # approval cannot bring an older value back over this one
        self._withdraw(scope, namespace, key, keep=res.record.id if res.record else None,
                       why="replaced by a later put")
        if res.status == "pending":
            log.warning("put %r waits for review (%s): get and search show it once a person "
                        "approves it (memstrata review)", key, res.reason)

    def _delete(self, scope: Scope, namespace: tuple[str, ...], key: str,
                current: Fact | None) -> None:
        """Retire (or forget) the item. A model's store (an untrusted ``actor``) withdraws
        its own proposals of the item that wait for review (else a reviewer would approve an
        item it had deleted), and deletes no current item: its writes wait for a person, and
        a delete cannot wait (AccessDenied, nothing changed)."""
        if self.mem.policy.is_untrusted(self.actor) and current is not None:
            raise AccessDenied(
                f"delete {key!r} refused: this store writes as {self.actor!r}, whose "
                "changes wait for a person, and a delete cannot wait; nothing changed",
                hint="a person deletes it (memstrata forget, the inspector), or the "
                     "application does with its own store (actor='system')")
        # a put still waiting for review is withdrawn, or its approval would bring the
        # deleted item back (also after on_delete="forget")
        self._withdraw(scope, namespace, key, keep=None, why="deleted")
        if current is None:
            return
        if self.on_delete == "forget":
            self.mem.forget(scope, record_ids=[current.id])
        else:
            self.mem.facts.retire(current.id, scope=scope,
                                  reason="deleted through the LangGraph store")

    def _withdraw(self, scope: Scope, namespace: tuple[str, ...], key: str, *,
                  keep: str | None, why: str) -> None:
        """Withdraw the item's puts that wait for review (but ``keep``): the application's
        store withdraws every one, a model's store (an untrusted ``actor``) its own."""
        own = self.mem.policy.is_untrusted(self.actor)
        for waiting in self.mem.facts.in_namespace(scope, _subject(namespace),
                                                   attribute=_label(key), limit=100_000,
                                                   status="pending_review"):
            if waiting.id == keep or (own and waiting.provenance.actor != self.actor):
                continue
            self.mem.review.reject(waiting.id, scope=scope,
                                   reason=f"withdrawn: {why} through the LangGraph store "
                                          "before review")

    def _kept(self, candidates: list[Fact], prefix: tuple[str, ...],
              wanted: dict[str, Any] | None) -> list[tuple[Fact, dict[str, Any]]]:
        """The candidates that are items of this store under ``prefix`` matching the
        filter, with their envelopes, in the candidates' order."""
        keep: list[tuple[Fact, dict[str, Any]]] = []
        for fact in candidates:
            env = self._envelope(fact)
            if env is None or tuple(env["ns"][:len(prefix)]) != prefix:
                continue
            if wanted and not all(matches(env["value"].get(k), v) for k, v in wanted.items()):
                continue
            keep.append((fact, env))
        return keep

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = _check_labels(op.namespace_prefix, "search prefix")
        scope, _ = self._split(prefix, partial=True)
        limit, offset = _page(op.limit, "limit", "search"), \
            _page(op.offset, "offset", "search")
        check_filter(op.filter)
        window = offset + limit
        # without a query the page is the newest items: read a few more than it needs, and
        # more only when items of other layouts or the filter thinned them out
        fetch = MAX_ITEMS if op.query else min(MAX_ITEMS, 2 * window + 16)
        while True:
            candidates = self.mem.facts.in_namespace(scope, _prefix_subject(prefix),
                                                     deeper=True, limit=fetch)
            keep = self._kept(candidates, prefix, op.filter)
            if op.query or len(keep) >= window or len(candidates) < fetch or \
                    fetch == MAX_ITEMS:
                break
            fetch = min(MAX_ITEMS, fetch * 4)
        if len(candidates) == MAX_ITEMS:
            log.warning("search %r read the newest %d items only", prefix, MAX_ITEMS)
        chosen: list[tuple[Fact, dict[str, Any], float | None]] = []
        if op.query:
            by_id = {f.id: (f, env) for f, env in keep}
            indexed = [f.id for f, env in keep if env.get("indexed", True)]
            if len(indexed) > MAX_RANKED:
                log.warning("search %r ranks the newest %d of %d items", prefix, MAX_RANKED,
                            len(indexed))
                indexed = indexed[:MAX_RANKED]
            # at most MAX_RANKED are ranked: a larger page asks for them all
            hits = self.mem.gate.rank(scope, op.query, fact_ids=indexed,
                                      k=min(max(window, 1), MAX_RANKED)) if indexed else []
            ranked = {h.ref.removeprefix("fact:") for h in hits}
            chosen = [(*by_id[h.ref.removeprefix("fact:")], h.score) for h in hits]
            chosen += [(f, env, None) for f, env in keep
                       if not env.get("indexed", True) and f.id not in ranked]
        else:
            chosen = [(f, env, None) for f, env in keep]
        page = chosen[offset:window]
        self._refresh(scope, [(f, env) for f, env, _ in page], op.refresh_ttl)
        return [self._item(f, env, score, searched=True)  # type: ignore[misc]
                for f, env, score in page]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        limit, offset = _page(op.limit, "limit", "list_namespaces"), \
            _page(op.offset, "offset", "list_namespaces")
        depth = _depth(op.max_depth)
        for cond in op.match_conditions or ():
            _check_labels(tuple(p for p in cond.path if p != "*"), "match path")
        found: set[tuple[str, ...]] = set()
        for scope, subject, evidence in self.mem.facts.subject_groups(self.scope, ROOT):
            try:
                env = json.loads(evidence or "")
                namespace = tuple(env["ns"])
                mine, _ = self._split(namespace)
            except (ValueError, KeyError, TypeError):
                continue
            if mine != scope or _subject(namespace) != subject:
                continue  # written by a store of another layout: not an item of this one
            found.add(namespace)
        names = [ns for ns in found
                 if all(_matches(ns, c) for c in op.match_conditions or ())]
        if depth is not None:
            names = list({ns[:depth] for ns in names})
        return sorted(names)[offset:offset + limit]


__all__ = ["MemstrataStore", "NamespaceError"]
