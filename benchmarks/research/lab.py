"""Research helpers: per-conversation score matrices (FTS5 bm25, MiniLM cosine) and fast metrics.

Every experiment computes, for each conversation, a (questions x turns) score matrix and ranks
turns by it, so that fusion and re-ranking ideas are numpy one-liners. Nothing here reads QA
annotations into an index.
"""

from __future__ import annotations

import re
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from embed import Embedder

from memstrata.bench.locomo import Conversation, Turn, load_locomo, render_turn

DATA = "/work/shared/bench/locomo/locomo_dev.json"
CONVS, REPORT = load_locomo(DATA)
_EMB: Embedder | None = None


def emb() -> Embedder:
    global _EMB
    if _EMB is None:
        _EMB = Embedder()
    return _EMB


STOP = set(
    ["a", "an", "the", "and", "or", "but", "if", "of", "at", "by", "for", "with", "about", "against", "between", "into", "through", "during", "before", "after", "above", "below", "to", "from", "up", "down", "in", "out", "on", "off", "over", "under", "again", "further", "then", "once", "here", "there", "all", "any", "both", "each", "few", "more", "most", "other", "some", "such", "no", "nor", "not", "only", "own", "same", "so", "than", "too", "very", "s", "t", "can", "will", "just", "don", "should", "now", "i", "me", "my", "myself", "we", "our", "ours", "ourselves", "you", "your", "yours", "yourself", "yourselves", "he", "him", "his", "himself", "she", "her", "hers", "herself", "it", "its", "itself", "they", "them", "their", "theirs", "themselves", "what", "which", "who", "whom", "this", "that", "these", "those", "am", "is", "are", "was", "were", "be", "been", "being", "have", "has", "had", "having", "do", "does", "did", "doing", "would", "could", "ought", "i'm", "you're", "he's", "she's", "it's", "we're", "they're", "i've", "you've", "we've", "they've", "i'd", "you'd", "he'd", "she'd", "we'd", "they'd", "i'll", "you'll", "he'll", "she'll", "we'll", "they'll", "isn't", "aren't", "wasn't", "weren't", "hasn't", "haven't", "hadn't", "doesn't", "don't", "didn't", "won't", "wouldn't", "shan't", "shouldn't", "can't", "cannot", "couldn't", "mustn't", "let's", "that's", "who's", "what's", "here's", "there's", "when's", "where's", "why's", "how's", "how", "when", "where", "why"]
)

WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")


def terms(text: str, stop: set[str] = STOP) -> list[str]:
    out = []
    for w in WORD.findall(text.lower()):
        w = w.split("'")[0] if "'" in w else w
        if w and w not in stop:
            out.append(w)
    return out


def fts_scores(
    turns: Sequence[Turn],
    docs: Sequence[str] | Sequence[Sequence[str]],
    queries: Sequence[str],
    tokenizer: str = "porter unicode61",
    weights: Sequence[float] | None = None,
    prefix: bool = False,
    query_terms: Callable[[str], list[str]] = terms,
) -> np.ndarray:
    """(Q x N) of -bm25 (higher is better); 0 where FTS5 finds no match. OR-query of terms."""
    multi = not isinstance(docs[0], str)
    ncol = len(docs[0]) if multi else 1
    cols = ", ".join(f"c{i}" for i in range(ncol))
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5({cols}, tokenize='{tokenizer}')")
    rows = [tuple(d) if multi else (d,) for d in docs]
    db.executemany(
        f"INSERT INTO t(rowid, {cols}) VALUES (?, {', '.join('?' * ncol)})",
        [(i, *r) for i, r in enumerate(rows)],
    )
    w = ", ".join(str(x) for x in (weights or [1.0] * ncol))
    out = np.zeros((len(queries), len(turns)), dtype=np.float32)
    for qi, q in enumerate(queries):
        ts = list(dict.fromkeys(query_terms(q)))
        if not ts:
            continue
        expr = " OR ".join(f'"{t}"' + ("*" if prefix else "") for t in ts)
        for rowid, score in db.execute(
            f"SELECT rowid, bm25(t, {w}) FROM t WHERE t MATCH ?", (expr,)
        ):
            out[qi, rowid] = -score
    db.close()
    return out


def dense_scores(docs: Sequence[str], queries: Sequence[str]) -> np.ndarray:
    d = emb().embed_cached(list(docs))
    q = emb().embed_cached(list(queries))
    return q @ d.T


CATS = (1, 2, 3, 4, 5)


def evaluate_scores(
    score_fn: Callable[[Conversation], np.ndarray] | None = None,
    rank_fn: Callable[[Conversation], list[list[int]]] | None = None,
    ks: Sequence[int] = (5, 10, 20),
    convs: Sequence[Conversation] | None = None,
    per_conv: bool = False,
    tokens: bool = False,
) -> dict[str, float]:
    """Metrics over all conversations from a score matrix (or explicit rankings) per conv."""
    convs = convs or CONVS
    rec: dict[tuple[int, int], list[float]] = {}
    rr: list[float] = []
    conv_r10: dict[str, list[float]] = {}
    share: list[float] = []
    for c in convs:
        ids = [t.dia_id for t in c.turns]
        if rank_fn is not None:
            ranks = rank_fn(c)
        else:
            s = score_fn(c)  # type: ignore[misc]
            # stable tie-break by turn order
            ranks = [list(np.argsort(-row, kind="stable")[: max(ks)]) for row in s]
        if tokens:
            tl = np.array([len(render_turn(t)) / 4.0 for t in c.turns])
            total = tl.sum()
        for q, r in zip(c.questions, ranks, strict=True):
            ranked = [ids[i] for i in r]
            ev = set(q.evidence)
            for k in ks:
                rec.setdefault((q.category, k), []).append(
                    len(ev & set(ranked[:k])) / len(ev)
                )
            if q.category != 5:
                first = next((i for i, d in enumerate(ranked) if d in ev), None)
                rr.append(0.0 if first is None else 1 / (first + 1))
                conv_r10.setdefault(c.sample_id, []).append(len(ev & set(ranked[:10])) / len(ev))
                if tokens:
                    share.append(tl[list(r[:10])].sum() / total)
    out: dict[str, float] = {}
    for k in ks:
        allv = [v for c in (1, 2, 3, 4) for v in rec.get((c, k), [])]
        out[f"R@{k}"] = float(np.mean(allv))
    out["MH@10"] = float(np.mean(rec[(1, 10)]))
    out["T@10"] = float(np.mean(rec[(2, 10)]))
    out["OD@10"] = float(np.mean(rec[(3, 10)]))
    out["SH@10"] = float(np.mean(rec[(4, 10)]))
    out["C5@10"] = float(np.mean(rec[(5, 10)]))
    out["MRR"] = float(np.mean(rr))
    if tokens:
        out["share@10"] = float(np.mean(share))
    if per_conv:
        for sid, v in conv_r10.items():
            out[sid] = float(np.mean(v))
    return out


def fmt(name: str, m: dict[str, float]) -> str:
    return f"{name:40s} " + " ".join(f"{k}={v:.3f}" for k, v in m.items())
