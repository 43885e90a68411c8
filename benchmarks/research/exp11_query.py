"""Query processing for the BM25 leg: extended stoplist, prefixes, phrase bigrams."""
import itertools
import sqlite3

import numpy as np
from exp02_context import ctx_cols
from exp03_speaker import named_mask
from exp04_dense import dense
from exp10_fusion2 import maxnorm
from lab import STOP, evaluate_scores, fmt, terms

EXTRA = set(["kind", "kinds", "type", "types", "sort", "thing", "things", "something", "anything", "stuff", "way", "ways", "much", "many", "also", "likely", "would", "could", "might", "may", "lot", "lots", "get", "got", "go", "going", "one", "ones", "some", "other", "else", "ever"])

cache = {}


def bm_q(c, mode, w=(1, 0.5, 0.2), ctx=(2, 2)):
    key = (c.sample_id, mode, w, ctx)
    if key in cache:
        return cache[key]
    names = {s.lower() for s in c.speakers}
    stop = STOP | names | (EXTRA if "extra" in mode else set())
    docs = ctx_cols(c, *ctx)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(c0, c1, c2, tokenize='porter unicode61')")
    db.executemany("INSERT INTO t(rowid,c0,c1,c2) VALUES (?,?,?,?)", [(i, *d) for i, d in enumerate(docs)])
    n = len(docs)
    out = np.zeros((len(c.questions), n), dtype=np.float32)
    for qi, q in enumerate(c.questions):
        ts = list(dict.fromkeys(terms(q.question, stop)))
        parts = [f'"{t}"' + ("*" if "prefix" in mode else "") for t in ts]
        if "bigram" in mode:
            parts += [f'"{a} {b}"' for a, b in itertools.pairwise(ts)]
        if not parts:
            continue
        for rowid, s in db.execute(f"SELECT rowid, bm25(t, {w[0]}, {w[1]}, {w[2]}) FROM t WHERE t MATCH ?", (" OR ".join(parts),)):
            out[qi, rowid] = -s
    cache[key] = out
    return out


def final(c, Bm, beta=0.3):
    return 0.5 * maxnorm(Bm) + 0.5 * dense(c, "ctx1_1") + beta * named_mask(c)


if __name__ == "__main__":
    for mode in ["base", "extra", "prefix", "bigram", "extra bigram"]:
        print(fmt(mode, evaluate_scores(lambda c: final(c, bm_q(c, mode)))))
