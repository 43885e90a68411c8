"""Baselines: BM25 (FTS5) and MiniLM over '[date] speaker: text [shares caption]'; plain RRF."""
import numpy as np
from lab import dense_scores, evaluate_scores, fmt, fts_scores, render_turn

cache: dict = {}


def bm25(c, tok="porter unicode61"):
    key = ("bm25", c.sample_id, tok)
    if key not in cache:
        cache[key] = fts_scores(c.turns, [render_turn(t) for t in c.turns],
                                [q.question for q in c.questions], tokenizer=tok)
    return cache[key]


def dense(c):
    key = ("dense", c.sample_id)
    if key not in cache:
        cache[key] = dense_scores([render_turn(t) for t in c.turns], [q.question for q in c.questions])
    return cache[key]


def rrf(*mats, k=60):
    out = 0
    for m in mats:
        r = np.argsort(np.argsort(-m, axis=1, kind="stable"), axis=1)
        out = out + 1.0 / (k + r + 1)
    return out


if __name__ == "__main__":
    print(fmt("bm25 unicode61", evaluate_scores(lambda c: bm25(c, "unicode61"), tokens=True)))
    print(fmt("bm25 porter", evaluate_scores(bm25, tokens=True)))
    print(fmt("dense", evaluate_scores(dense, tokens=True)))
    print(fmt("rrf porter+dense", evaluate_scores(lambda c: rrf(bm25(c), dense(c)), tokens=True)))
    print(fmt("rrf unicode+dense", evaluate_scores(lambda c: rrf(bm25(c, "unicode61"), dense(c)))))
