"""Contextual indexing for BM25: add neighbouring turns of the same session as extra columns."""
import numpy as np
from lab import evaluate_scores, fmt, fts_scores, render_turn


def own(t):
    return render_turn(t)


def ctx_cols(c, before=1, after=0):
    turns = c.turns
    out = []
    for i, t in enumerate(turns):
        prev = " ".join(
            f"{turns[j].speaker}: {turns[j].text}" + (f" [shares {turns[j].caption}]" if turns[j].caption else "")
            for j in range(max(0, i - before), i) if turns[j].session == t.session)
        nxt = " ".join(
            f"{turns[j].speaker}: {turns[j].text}" + (f" [shares {turns[j].caption}]" if turns[j].caption else "")
            for j in range(i + 1, min(len(turns), i + 1 + after)) if turns[j].session == t.session)
        out.append((own(t), prev, nxt))
    return out


cache = {}


def bm(c, before, after, w):
    key = (c.sample_id, before, after, w)
    if key not in cache:
        cache[key] = fts_scores(c.turns, ctx_cols(c, before, after), [q.question for q in c.questions],
                                weights=w)
    return cache[key]


def propagate(s, c, a_prev, a_next):
    """score(i) += a_prev*score(i-1) + a_next*score(i+1), same session only."""
    sess = np.array([t.session for t in c.turns])
    same_prev = np.r_[False, sess[1:] == sess[:-1]]
    same_next = np.r_[sess[:-1] == sess[1:], False]
    prev = np.zeros_like(s); prev[:, 1:] = s[:, :-1]; prev[:, ~same_prev] = 0
    nxt = np.zeros_like(s); nxt[:, :-1] = s[:, 1:]; nxt[:, ~same_next] = 0
    return s + a_prev * prev + a_next * nxt


if __name__ == "__main__":
    for w in [(1, 0, 0), (1, 0.3, 0), (1, 0.5, 0), (1, 0.7, 0), (1, 0.3, 0.3), (1, 0.5, 0.2), (1, 0.2, 0.2)]:
        print(fmt(f"cols1/1 w={w}", evaluate_scores(lambda c: bm(c, 1, 1, w), tokens=True)))
    for w in [(1, 0.3, 0.3), (1, 0.5, 0.2), (1, 0.3, 0.1)]:
        print(fmt(f"cols2/2 w={w}", evaluate_scores(lambda c: bm(c, 2, 2, w))))
    for ap, an in [(0.3, 0), (0.5, 0), (0.3, 0.1), (0.5, 0.2), (0.2, 0.2)]:
        print(fmt(f"propagate {ap},{an}", evaluate_scores(lambda c: propagate(bm(c, 1, 1, (1, 0, 0)), c, ap, an))))
