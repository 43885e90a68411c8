"""LoCoMo evidence-recall benchmark: loader, metrics, evaluation driver, reference retrievers
(the data in :mod:`.locomo_data`, the retrievers in :mod:`.locomo_retrievers`, both
re-exported here).

Contract:
- :func:`load_locomo` reads the public ``locomo10.json`` layout (or a subset of it). Sessions come
  from the ``session_N`` keys (never from the date keys, which can outnumber them); each turn gets
  its session's date (``session_N_date_time``, read as UTC). Only turns, speakers, session dates
  and image captions (``blip_caption``) are kept for indexing; QA annotations are kept apart and
  observations/summaries are never read.
- Evidence ids are normalised (``"D8:6; D9:17"`` -> two ids, ``"D:11:26"`` -> ``D11:26``,
  ``"D30:05"`` -> ``D30:5``); ids that name no turn of the conversation are dropped and a question
  left with no evidence is skipped. Every such case is counted in :class:`LoadReport`.
- :func:`evaluate` builds one retriever per conversation from its turns only, asks every question
  once for ``max(ks)`` results and reports, per retriever: evidence recall@k (share of a
  question's evidence turns in the top k, averaged over questions) for categories 1-4 together,
  per category and for category 5 apart; MRR (first evidence hit within ``max(ks)``); the tokens
  the top k turns put into a prompt against the whole conversation; query latency p50/p95.
- Retrievers search one conversation only and return ``dia_id`` strings, best first. Built in:
  :class:`BM25Retriever` and :class:`VectorRetriever` (the baselines, over :func:`render_turn`
  text), :class:`RRFRetriever` (their plain fusion) and :class:`RecipeRetriever`, the
  reference recipe for the store's recall path (pure Python + numpy + in-memory FTS5).
- :func:`run` is the one call behind ``memstrata bench locomo --data PATH``: load, evaluate
  the four retrievers in one run, return JSON-ready figures (:func:`format_table` /
  :func:`table_rows` render them). Nothing is downloaded; the embedder is resolved with
  :func:`memstrata.providers.embeddings.get_embedder`.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from memstrata.errors import ValidationError
from memstrata.tokens import count_tokens

from .locomo_data import (
    Conversation,
    LoadReport,
    Question,
    Turn,
    load_locomo,
    normalise_evidence,
    parse_session_date,
    render_turn,
)
from .locomo_retrievers import (
    STOPWORDS,
    BM25Retriever,
    DateWindow,
    RecipeConfig,
    RecipeRetriever,
    RRFRetriever,
    VectorRetriever,
    fts_query,
    named_speakers,
    query_terms,
    question_date_window,
    turn_line,
)

if TYPE_CHECKING:
    import numpy.typing as npt

    from memstrata.providers.embeddings import Embedder

    Vectors = npt.NDArray[np.float32]

CATEGORY_NAMES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
HEADLINE_CATEGORIES: frozenset[int] = frozenset({1, 2, 3, 4})


# --------------------------------------------------------------------------- metrics


class Retriever(Protocol):
    """Searches the turns of one conversation."""

    def search(self, question: str, k: int) -> list[str]:
        """Up to ``k`` dia_ids, best first."""
        ...


RetrieverFactory = Callable[[Sequence[Turn]], Retriever]
Progress = Callable[[str, int, int], None]


def recall_at(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """Share of ``evidence`` found in the first ``k`` of ``ranked``."""
    if not evidence:
        raise ValidationError("recall needs at least one evidence id")
    top = set(ranked[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


def reciprocal_rank(ranked: Sequence[str], evidence: Sequence[str]) -> float:
    """1/rank of the first evidence turn in ``ranked`` (0 if none)."""
    wanted = set(evidence)
    for i, dia_id in enumerate(ranked, start=1):
        if dia_id in wanted:
            return 1.0 / i
    return 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class _QueryRow:
    sample_id: str
    category: int
    recalls: dict[int, float]
    rr: float
    tokens: dict[int, int]
    conv_tokens: int
    latency_ms: float


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return statistics.fmean(vals) if vals else 0.0


def _summarise(rows: Sequence[_QueryRow], ks: Sequence[int]) -> dict[str, Any]:
    out: dict[str, Any] = {"questions": len(rows)}
    for k in ks:
        out[f"recall@{k}"] = _mean(r.recalls[k] for r in rows)
    out["mrr"] = _mean(r.rr for r in rows)
    for k in ks:
        out[f"tokens@{k}"] = _mean(r.tokens[k] for r in rows)
        out[f"token_share@{k}"] = _mean(r.tokens[k] / r.conv_tokens for r in rows)
    return out


def _report(rows: Sequence[_QueryRow], ks: Sequence[int]) -> dict[str, Any]:
    headline = [r for r in rows if r.category in HEADLINE_CATEGORIES]
    latencies = [r.latency_ms for r in rows]
    per_cat = {
        f"{c}-{name}": _summarise([r for r in rows if r.category == c], ks)
        for c, name in CATEGORY_NAMES.items()
        if any(r.category == c for r in rows)
    }
    per_conv = {
        sid: _summarise([r for r in headline if r.sample_id == sid], ks)
        for sid in dict.fromkeys(r.sample_id for r in rows)
    }
    return {
        "categories_1_4": _summarise(headline, ks),
        "category_5": _summarise([r for r in rows if r.category == 5], ks),
        "per_category": per_cat,
        "per_conversation_1_4": per_conv,
        "latency_ms": {
            "p50": percentile(latencies, 50),
            "p95": percentile(latencies, 95),
            "mean": _mean(latencies),
        },
    }


def evaluate(
    convs: Sequence[Conversation],
    retrievers: Mapping[str, RetrieverFactory],
    ks: Sequence[int] = (5, 10, 20),
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run every retriever over every conversation; return the metrics as a JSON-ready dict.

    ``progress(retriever_name, done_questions, total_questions)`` is called after each
    conversation. Build time (indexing, embedding the turns) is reported apart from query latency.
    """
    ks = sorted(set(ks))
    if not ks or ks[0] < 1:
        raise ValidationError("ks must be positive")
    depth = ks[-1]
    total = sum(len(c.questions) for c in convs)
    rendered = {c.sample_id: [render_turn(t) for t in c.turns] for c in convs}
    turn_tokens = {
        c.sample_id: {t.dia_id: count_tokens(render_turn(t)) for t in c.turns} for c in convs
    }
    conv_tokens = {sid: count_tokens("\n".join(lines)) for sid, lines in rendered.items()}
    results: dict[str, Any] = {}
    for name, factory in retrievers.items():
        rows: list[_QueryRow] = []
        build_s = 0.0
        done = 0
        for conv in convs:
            t0 = time.perf_counter()
            retriever = factory(conv.turns)
            build_s += time.perf_counter() - t0
            tok = turn_tokens[conv.sample_id]
            exact = bool(getattr(retriever, "exact_k", False))
            for q in conv.questions:
                t0 = time.perf_counter()
                ranked = retriever.search(q.question, depth)
                latency = (time.perf_counter() - t0) * 1000
                # a retriever that answers a k=10 call differently from the top 10 of a k=20
                # one is scored on what each call returns
                per_k = {k: retriever.search(q.question, k) if exact and k != depth
                         else ranked for k in ks}
                rows.append(
                    _QueryRow(
                        sample_id=conv.sample_id,
                        category=q.category,
                        recalls={k: recall_at(per_k[k], q.evidence, k) for k in ks},
                        rr=reciprocal_rank(ranked[:depth], q.evidence),
                        # +1 a turn for the newline that separates turns in a prompt
                        tokens={k: sum(tok.get(d, 0) + 1 for d in per_k[k][:k]) for k in ks},
                        conv_tokens=conv_tokens[conv.sample_id],
                        latency_ms=latency,
                    )
                )
            done += len(conv.questions)
            if progress is not None:
                progress(name, done, total)
        summary = _report(rows, ks)
        summary["build_s"] = build_s
        results[name] = summary
    return {
        "ks": list(ks),
        "conversations": [c.sample_id for c in convs],
        "conversation_tokens": conv_tokens,
        "retrievers": results,
    }


# --------------------------------------------------------------------------- running


class _DocumentCache:
    """Memoises document embeddings across retrievers of one run (queries are not cached,
    so every retriever's latency includes embedding its query)."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self._cache: dict[str, Vectors] = {}
        self.model_name = inner.model_name
        self.dims = inner.dims

    def embed(self, texts: Sequence[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            for text, vec in zip(missing, self._inner.embed(missing), strict=True):
                self._cache[text] = vec
        return np.stack([self._cache[t] for t in texts]).astype(np.float32)

    def embed_query(self, text: str) -> Vectors:
        return self._inner.embed_query(text)


RETRIEVER_NAMES: tuple[str, ...] = ("memstrata", "memstrata-history", "memstrata-turns",
                                     "memstrata-turns-history", "bm25", "vector", "rrf",
                                     "recipe")


def _embedding_factory(name: str, embedder: Embedder, url: str | None = None
                       ) -> RetrieverFactory:
    def build(turns: Sequence[Turn]) -> Retriever:
        if name.startswith("memstrata"):
            from .locomo_store import StoreRetriever

            return StoreRetriever(turns, embedder,
                                  path="search_history" if name.endswith("-history")
                                  else "recall",
                                  storage="per-turn" if "-turns" in name else "session",
                                  url=url)
        if name == "vector":
            return VectorRetriever(turns, embedder)
        if name == "rrf":
            return RRFRetriever(turns, embedder)
        return RecipeRetriever(turns, embedder)

    return build


def default_retrievers(
    embedder: Embedder | None, names: Sequence[str] = RETRIEVER_NAMES, *,
    url: str | None = None,
) -> dict[str, RetrieverFactory]:
    """Factories for the named retrievers; the embedding ones need ``embedder``. ``url``:
    the store retrievers keep their conversations in that database (see
    :class:`~memstrata.bench.locomo_store.StoreRetriever`), else in a temporary SQLite file
    each."""
    factories: dict[str, RetrieverFactory] = {}
    for name in names:
        if name == "bm25":
            factories[name] = BM25Retriever
        elif name not in RETRIEVER_NAMES:
            known = ", ".join(RETRIEVER_NAMES)
            raise ValidationError(f"unknown retriever {name!r}; known: {known}")
        elif embedder is None:
            raise ValidationError(f"retriever {name!r} needs an embedder")
        else:
            factories[name] = _embedding_factory(name, embedder, url)
    return factories


def run(
    data: str | Path,
    *,
    embedder: str | Embedder | None = "minilm",
    names: Sequence[str] = RETRIEVER_NAMES,
    ks: Sequence[int] = (5, 10, 20),
    progress: Progress | None = None,
    url: str | None = None,
) -> dict[str, Any]:
    """Load ``data``, evaluate the named retrievers, return the JSON-ready result
    (``url``: where the store retrievers keep the conversations; see
    :func:`default_retrievers`)."""
    convs, report = load_locomo(data)
    emb: Embedder | None
    if isinstance(embedder, str):
        from memstrata.providers.embeddings import get_embedder

        emb = get_embedder(embedder)
    else:
        emb = embedder
    needs_embedder = any(n != "bm25" for n in names)
    cached = _DocumentCache(emb) if emb is not None and needs_embedder else None
    result = evaluate(convs, default_retrievers(cached, names, url=url), ks=ks,
                      progress=progress)
    result["data"] = str(data)
    # the engine only: a URL may hold a password
    result["store"] = url.split(":", 1)[0] if url is not None else "sqlite (a file each)"
    result["load"] = report.as_dict()
    result["embedder"] = emb.model_name if emb is not None else None
    result["recipe"] = RecipeConfig().__dict__ if "recipe" in names else None
    return result


TABLE_HEADERS: tuple[str, ...] = (
    "retriever", "R@5", "R@10", "R@20", "multi-hop R@10", "cat-5 R@10", "MRR",
    "tokens@10", "share@10", "p50 ms", "p95 ms",
)


def table_rows(result: Mapping[str, Any]) -> list[list[str]]:
    """One row per retriever (categories 1-4 unless named otherwise), for ``TABLE_HEADERS``."""
    rows = []
    for name, r in result["retrievers"].items():
        head = r["categories_1_4"]
        multi = r["per_category"].get("1-multi-hop", {})
        cat5 = r["category_5"]
        rows.append([
            name,
            *(f"{head.get(f'recall@{k}', 0.0):.3f}" for k in (5, 10, 20)),
            f"{multi.get('recall@10', 0.0):.3f}",
            f"{cat5.get('recall@10', 0.0):.3f}",
            f"{head['mrr']:.3f}",
            f"{head.get('tokens@10', 0.0):.0f}",
            f"{100 * head.get('token_share@10', 0.0):.2f}%",
            f"{r['latency_ms']['p50']:.1f}",
            f"{r['latency_ms']['p95']:.1f}",
        ])
    return rows


def format_table(result: Mapping[str, Any]) -> str:
    """A plain-text table of :func:`table_rows`."""
    rows = [list(TABLE_HEADERS), *table_rows(result)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_HEADERS))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """``python -m memstrata.bench.locomo --data PATH [--out FILE] [--json]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", required=True)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--retrievers", default=",".join(RETRIEVER_NAMES))
    parser.add_argument("--out", default="bench-results/locomo.json")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--url", default=None)
    args = parser.parse_args(argv)
    result = run(args.data, embedder=args.embedder, names=args.retrievers.split(","),
                 url=args.url)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2) if args.json else format_table(result))
    return result


if __name__ == "__main__":
    main()


__all__ = [
    "CATEGORY_NAMES",
    "HEADLINE_CATEGORIES",
    "RETRIEVER_NAMES",
    "STOPWORDS",
    "TABLE_HEADERS",
    "BM25Retriever",
    "Conversation",
    "DateWindow",
    "LoadReport",
    "Progress",
    "Question",
    "RRFRetriever",
    "RecipeConfig",
    "RecipeRetriever",
    "Retriever",
    "RetrieverFactory",
    "Turn",
    "VectorRetriever",
    "default_retrievers",
    "evaluate",
    "format_table",
    "fts_query",
    "load_locomo",
    "main",
    "named_speakers",
    "normalise_evidence",
    "parse_session_date",
    "percentile",
    "query_terms",
    "question_date_window",
    "recall_at",
    "reciprocal_rank",
    "render_turn",
    "run",
    "table_rows",
    "turn_line",
]
