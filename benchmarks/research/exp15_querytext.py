"""Query text for the dense leg: as asked, declarative (wh-word and auxiliaries dropped),
speaker-prefixed like the index lines ("Caroline: research"), and the mean of two of them."""
import re

import numpy as np
from exp03_speaker import bm, named_mask
from exp04_dense import ctx_text
from exp10_fusion2 import maxnorm
from lab import emb, evaluate_scores, fmt

WH = re.compile(r"^\s*(what|when|where|who|whom|which|why|how|whose)\b(\s+(kind|kinds|type|types|sort|much|many|long|often|did|does|do|is|are|was|were|has|have|had|would|will|could|can|might|might|should)\b)*", re.I)

def declarative(q):
    s = WH.sub("", q).strip().rstrip("?").strip()
    return s or q

def speaker_form(q, speakers):
    named = [s for s in speakers if re.search(rf"\b{re.escape(s)}\b", q)]
    d = declarative(q)
    if len(named) == 1:
        n = named[0]
        rest = re.sub(rf"\b{re.escape(n)}('s)?\b", "", d).strip(" ,")
        rest = re.sub(r"\s+", " ", rest)
        return f"{n}: {rest}"
    return d

docs_cache = {}
def D(c):
    if c.sample_id not in docs_cache:
        docs_cache[c.sample_id] = emb().embed_cached(ctx_text(c, 1, 1))
    return docs_cache[c.sample_id]

def dense_q(c, mode):
    qs = [q.question for q in c.questions]
    if mode == "asked":
        Q = emb().embed_cached(qs)
    elif mode == "decl":
        Q = emb().embed_cached([declarative(q) for q in qs])
    elif mode == "spk":
        Q = emb().embed_cached([speaker_form(q, c.speakers) for q in qs])
    elif mode.startswith("avg"):
        other = "spk" if "spk" in mode else "decl"
        A = emb().embed_cached(qs)
        B = emb().embed_cached([speaker_form(q, c.speakers) if other == "spk" else declarative(q) for q in qs])
        Q = A + B
        Q = Q / np.linalg.norm(Q, axis=1, keepdims=True)
    return Q @ D(c).T

def final(c, mode):
    return 0.5 * maxnorm(bm(c, 2, 2, (1, 0.5, 0.2), True)) + 0.5 * dense_q(c, mode) + 0.3 * named_mask(c)

if __name__ == "__main__":
    from lab import CONVS
    c = CONVS[0]
    for q in c.questions[:6]:
        print(q.question, "|", declarative(q.question), "|", speaker_form(q.question, c.speakers))
    for mode in ["asked", "decl", "spk", "avg-decl", "avg-spk"]:
        print(fmt(mode, evaluate_scores(lambda c: final(c, mode))), flush=True)
