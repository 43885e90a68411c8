"""Speaker emphasis: drop speaker names from the BM25 query, boost turns by the named speaker."""
import re

import numpy as np
from exp02_context import ctx_cols
from lab import STOP, evaluate_scores, fmt, fts_scores, terms

cache = {}


def named_mask(c):
    """(Q x N) True where the turn's speaker is the one speaker named in the question."""
    spk = np.array([t.speaker for t in c.turns])
    m = np.zeros((len(c.questions), len(c.turns)), dtype=bool)
    for qi, q in enumerate(c.questions):
        named = [s for s in c.speakers if re.search(rf"\b{re.escape(s)}\b", q.question)]
        if len(named) == 1:
            m[qi] = spk == named[0]
    return m


def bm(c, before, after, w, drop_names):
    key = (c.sample_id, before, after, w, drop_names)
    if key not in cache:
        stop = STOP | ({s.lower() for s in c.speakers} if drop_names else set())
        cache[key] = fts_scores(c.turns, ctx_cols(c, before, after), [q.question for q in c.questions],
                                weights=w, query_terms=lambda q: terms(q, stop))
    return cache[key]


if __name__ == "__main__":
    for drop in (False, True):
        for ctx, w in [((1, 1), (1, 0, 0)), ((2, 2), (1, 0.5, 0.2))]:
            for boost in (0, 0.2, 0.5, 1.0):
                f = lambda c: bm(c, *ctx, w, drop) * (1 + boost * named_mask(c))
                print(fmt(f"drop={drop} ctx={ctx} w={w} boost={boost}", evaluate_scores(f)))
