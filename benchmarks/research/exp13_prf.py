"""Pseudo-relevance feedback on the dense leg (Rocchio with the top fused hits) and per-conv view."""
import numpy as np
from exp03_speaker import named_mask
from exp04_dense import ctx_text
from exp10_fusion2 import maxnorm
from exp11_query import bm_q
from exp12_dates import date_mask
from lab import emb, evaluate_scores, fmt

vec = {}


def vecs(c):
    if c.sample_id not in vec:
        d = emb().embed_cached(ctx_text(c, 1, 1))
        q = emb().embed_cached([q.question for q in c.questions])
        vec[c.sample_id] = (q, d)
    return vec[c.sample_id]


def recipe(c, alpha=0.0, top=3, beta=0.3, gamma=0.2):
    q, d = vecs(c)
    B = maxnorm(bm_q(c, "base"))
    extra = beta * named_mask(c) + gamma * date_mask(c, 3)
    s = 0.5 * B + 0.5 * (q @ d.T) + extra
    if alpha:
        idx = np.argsort(-s, axis=1)[:, :top]
        q2 = q + alpha * d[idx].mean(1)
        q2 /= np.linalg.norm(q2, axis=1, keepdims=True)
        s = 0.5 * B + 0.5 * (q2 @ d.T) + extra
    return s


if __name__ == "__main__":
    print(fmt("recipe", evaluate_scores(recipe, per_conv=True, tokens=True)))
    for a, top in [(0.3, 3), (0.5, 3), (0.5, 5), (1.0, 5)]:
        print(fmt(f"prf a={a} top={top}", evaluate_scores(lambda c: recipe(c, a, top))))
