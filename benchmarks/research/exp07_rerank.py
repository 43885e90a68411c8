"""Post-fusion re-ranking: neighbour-redundancy penalty (diversity), session-level boost."""
import numpy as np
from exp05_fusion import B, D, z
from lab import evaluate_scores, fmt


def fused(c, wd=0.5):
    return (1 - wd) * z(B(c)) + wd * z(D(c, "ctx1_1", 0.2))


def diversify(c, s, radius=2, lam=0.5, depth=20, pool=60):
    """Greedy: a candidate within `radius` turns (same session) of an already chosen one loses lam*|score|."""
    sess = np.array([t.session for t in c.turns])
    out = []
    for row in s:
        cand = list(np.argsort(-row, kind="stable")[:pool])
        chosen = []
        while cand and len(chosen) < depth:
            best, bval = None, -1e9
            for i in cand:
                near = any(sess[j] == sess[i] and abs(j - i) <= radius for j in chosen)
                v = row[i] - (lam * abs(row[i]) if near else 0)
                if v > bval:
                    best, bval = i, v
            chosen.append(best); cand.remove(best)
        out.append(chosen)
    return out


def session_boost(c, s, g=0.3, top=3):
    sess = np.array([t.session for t in c.turns])
    out = s.copy()
    for u in np.unique(sess):
        m = sess == u
        block = np.sort(s[:, m], axis=1)[:, ::-1][:, :top].mean(1)
        out[:, m] += g * block[:, None]
    return out


if __name__ == "__main__":
    print(fmt("fused", evaluate_scores(fused, tokens=True)))
    for r, lam in [(1, 0.3), (1, 0.6), (2, 0.3), (2, 0.6), (3, 0.5)]:
        print(fmt(f"div r={r} lam={lam}", evaluate_scores(rank_fn=lambda c: diversify(c, fused(c), r, lam))))
    for g, top in [(0.2, 1), (0.3, 3), (0.5, 3), (0.3, 5)]:
        print(fmt(f"sessboost g={g} top={top}", evaluate_scores(lambda c: session_boost(c, fused(c), g, top))))
