"""Two dense views per turn (own line with date, and the 1+1 context window): sum or averaged vector."""
import numpy as np
from exp03_speaker import named_mask
from exp10_fusion2 import maxnorm
from exp11_query import bm_q
from exp12_dates import date_mask
from exp13_prf import vecs
from lab import emb, evaluate_scores, fmt, render_turn

own = {}


def ovec(c):
    if c.sample_id not in own:
        own[c.sample_id] = emb().embed_cached([render_turn(t) for t in c.turns])
    return own[c.sample_id]


def recipe2(c, wo=0.25, wc=0.25, mode="sum", wb=0.5):
    q, d = vecs(c)
    o = ovec(c)
    if mode == "sum":
        dense = wc * (q @ d.T) + wo * (q @ o.T)
    else:
        m = d + o
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        dense = (wc + wo) * (q @ m.T)
    return wb * maxnorm(bm_q(c, "base")) + dense + 0.3 * named_mask(c) + 0.2 * date_mask(c, 3)


if __name__ == "__main__":
    for wo, wc in [(0, 0.5), (0.15, 0.35), (0.25, 0.25), (0.35, 0.15)]:
        print(fmt(f"sum wo={wo} wc={wc}", evaluate_scores(lambda c: recipe2(c, wo, wc))))
    print(fmt("avgvec", evaluate_scores(lambda c: recipe2(c, 0.25, 0.25, "avg"))))
    print(fmt("sum .25/.25 wb .6", evaluate_scores(lambda c: recipe2(c, 0.3, 0.3, "sum", 0.6))))
