"""memstrata itself as a LoCoMo retriever: the store and the recall gate, nothing else.

Each conversation gets a fresh embedded store. Every turn is appended as an
episode — ``text`` (with the shared image's caption), ``subject`` = the
speaker, ``observed_at`` = the session date, and either ``source`` = the session (the
store threads by source when no thread is given; ``storage="session"``) or one provenance
ref per turn, ``source = "locomo:session_N/D1:3"``, with the session as ``thread``
(``storage="per-turn"``, as an agent following DESIGN's examples writes them) — and each
question goes through ``mem.recall(..., layers=["episodes"])`` or (``path=
"search_history"``) through the agent tool ``search_history``, as the MCP server calls it.
A search asks for exactly ``k`` results (the harness calls it once per k).
With ``url`` (``memstrata bench locomo --url postgresql://...``) the conversations go
to that database instead, each under a user of its own in the tenant
:data:`BENCH_TENANT`, and are forgotten when the retriever is closed: the same ranking on
another engine, measured the same way.
Only the turns, their speakers and session dates are used: never the QA
annotations, observations or summaries.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..clock import ManualClock
from ..memory import Memory
from ..models import Scope

#: The tenant of the conversations stored in a database given by URL.
BENCH_TENANT = "locomo-bench"


class StoreRetriever:
    """Searches one conversation through a real memstrata store."""

    #: The harness calls :meth:`search` once per k and scores what each call returns.
    exact_k = True

    def __init__(self, turns: Sequence[Any], embedder: Any, *, path: str = "recall",
                 storage: str = "session", url: str | None = None) -> None:
        if path not in ("recall", "search_history"):
            raise ValueError(f"path must be 'recall' or 'search_history', not {path!r}")
        if storage not in ("session", "per-turn"):
            raise ValueError(f"storage must be 'session' or 'per-turn', not {storage!r}")
        self.path = path
        self._tools: Any = None
        self._dir: Path | None = None
        self._closed = False
        if url is None:
            self._dir = Path(tempfile.mkdtemp(prefix="memstrata-locomo-"))
            url = f"sqlite:///{self._dir / 'conv.db'}"
            self.scope = Scope(user="locomo")
        else:  # a shared database: this conversation's own user, forgotten on close
            self.scope = Scope(tenant=BENCH_TENANT, user=f"locomo-{uuid.uuid4().hex[:12]}")
        last = max(t.date for t in turns)
        self.mem = Memory.open(url, embedder=embedder,
                               clock=ManualClock(last + timedelta(days=1)))
        items = []
        for t in turns:
            shared = f" [shares {t.caption}]" if t.caption else ""
            item = {"scope": self.scope, "text": f"{t.text}{shared}", "event": "dialogue",
                    "subject": t.speaker, "actor": "user", "observed_at": t.date,
                    "source": f"session_{t.session}"}
            if storage == "per-turn":
                item.update(source=f"locomo:session_{t.session}/{t.dia_id}",
                            thread=f"session_{t.session}")
            items.append(item)
        stored = self.mem.episodes.append_many(items)
        self._dia = {e.ref: t.dia_id for e, t in zip(stored, turns, strict=True)}

    def search(self, question: str, k: int) -> list[str]:
        if self.path == "search_history":
            if self._tools is None:  # one dispatcher per conversation, as an MCP session
                from ..interfaces.tools import ToolDispatcher

                self._tools = ToolDispatcher(self.mem, self.scope)
            hits = self._tools.dispatch("search_history", {"query": question, "k": k})["hits"]
            refs = [h["ref"] for h in hits]
        else:
            res = self.mem.recall(self.scope, question, k=k, layers=["episodes"],
                                  budget_tokens=100_000)
            refs = [h.ref for h in res.items]
        return [self._dia[r] for r in refs if r in self._dia]

    def close(self) -> None:
        if self._tools is not None:
            self._tools.close()
            self._tools = None
        if self._closed:
            return
        self._closed = True
        if self._dir is None:
            self.mem.forget(self.scope)  # the conversation's own user, nothing else
        self.mem.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __del__(self) -> None:
        # best-effort temp cleanup when the harness drops the retriever
        with contextlib.suppress(Exception):
            self.close()


__all__ = ["BENCH_TENANT", "StoreRetriever"]
