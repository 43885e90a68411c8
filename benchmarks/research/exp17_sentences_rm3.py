"""Two more ways to lift the recipe: each sentence of a turn as its own dense view (the best
or the mean of the sentence cosines beside the turn's), and lexical RM3 feedback (the
best-weighted words of the fused ranking's top turns, as a second BM25 query)."""
import math
import re
from collections import Counter

import numpy as np
from exp02_context import ctx_cols
from exp03_speaker import bm, named_mask
from exp04_dense import dense
from lab import emb, evaluate_scores, fmt, fts_scores, terms


def maxnorm(m): return m / np.maximum(m.max(1, keepdims=True), 1e-9)


def B(c): return bm(c, 2, 2, (1, 0.5, 0.2), True)
def D(c): return dense(c, "ctx1_1")
def F(c): return 0.5 * maxnorm(B(c)) + 0.5 * D(c) + 0.3 * named_mask(c)


SPLIT = re.compile(r"(?<=[.!?])\s+")
_sent = {}


def sentences(c):
    """(Q x N) best cosine of a turn's sentences ("Speaker: sentence"); -1 for one-sentence turns."""
    if c.sample_id in _sent:
        return _sent[c.sample_id]
    owners, texts = [], []
    for i, t in enumerate(c.turns):
        parts = [s for s in SPLIT.split(t.text) if len(s.split()) >= 3]
        if len(parts) > 1:
            owners += [i] * len(parts)
            texts += [f"{t.speaker}: {s}" for s in parts]
    q = emb().embed_cached([x.question for x in c.questions])
    m = np.full((len(c.questions), len(c.turns)), -1.0, np.float32)
    if texts:
        s = q @ emb().embed_cached(texts).T
        for j, o in enumerate(owners):
            m[:, o] = np.maximum(m[:, o], s[:, j])
    _sent[c.sample_id] = m
    return m


def with_sentences(c, mode):
    s, d = sentences(c), D(c)
    dd = np.maximum(d, s) if mode == "max" else np.where(s > -1, (d + s) / 2, d)
    return 0.5 * maxnorm(B(c)) + 0.5 * dd + 0.3 * named_mask(c)


def rm3(c, m, e, gamma):
    base = F(c)
    toks = [terms(t.text) for t in c.turns]
    df = Counter(w for ts in toks for w in set(ts))
    n = len(toks)
    queries = []
    for qi, q in enumerate(c.questions):
        weights = Counter()
        known = set(terms(q.question)) | {s.lower() for s in c.speakers}
        for i in np.argsort(-base[qi])[:m]:
            length = max(1, len(toks[i]))
            for w, k in Counter(toks[i]).items():
                if w not in known and len(w) >= 3:
                    weights[w] += k / length * math.log(n / df[w]) * base[qi, i]
        queries.append(" ".join(w for w, _ in weights.most_common(e)))
    return base + gamma * maxnorm(fts_scores(c.turns, ctx_cols(c, 2, 2), queries,
                                             weights=(1, 0.5, 0.2)))


if __name__ == "__main__":
    print(fmt("recipe", evaluate_scores(F)))
    for mode in ("max", "mean"):
        print(fmt(f"sentences {mode}", evaluate_scores(lambda c: with_sentences(c, mode))))
    for m, e, g in [(3, 5, 0.1), (5, 8, 0.1), (5, 8, 0.2), (10, 10, 0.1), (3, 10, 0.05)]:
        print(fmt(f"rm3 top={m} words={e} weight={g}", evaluate_scores(lambda c: rm3(c, m, e, g))))
