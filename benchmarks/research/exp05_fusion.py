"""Fusion of contextual BM25 (+speaker boost) with MiniLM: weighted RRF and normalised sums."""
import numpy as np
from exp03_speaker import bm, named_mask
from exp04_dense import dense
from lab import evaluate_scores, fmt


def ranks(m):
    return np.argsort(np.argsort(-m, axis=1, kind="stable"), axis=1)


def rrf(mats, weights, k=60):
    return sum(w / (k + ranks(m) + 1) for m, w in zip(mats, weights, strict=True))


def minmax(m):
    lo = m.min(1, keepdims=True); hi = m.max(1, keepdims=True)
    return (m - lo) / np.maximum(hi - lo, 1e-9)


def z(m):
    return (m - m.mean(1, keepdims=True)) / np.maximum(m.std(1, keepdims=True), 1e-9)


def B(c, boost=0.5):
    return bm(c, 2, 2, (1, 0.5, 0.2), True) * (1 + boost * named_mask(c))


def D(c, kind="render", boost=0.0):
    return dense(c, kind) + boost * named_mask(c)


if __name__ == "__main__":
    print(fmt("B", evaluate_scores(B)))
    for kind, db in [("render", 0.0), ("render", 0.1), ("ctx1_1", 0.2)]:
        for wd in (0.3, 0.5, 1.0):
            print(fmt(f"rrf B + {wd}*D[{kind},{db}]", evaluate_scores(lambda c: rrf([B(c), D(c, kind, db)], [1, wd]))))
        for wd in (0.2, 0.35, 0.5):
            print(fmt(f"minmax B + {wd}*D[{kind},{db}]", evaluate_scores(lambda c: (1 - wd) * minmax(B(c)) + wd * minmax(D(c, kind, db)))))
            print(fmt(f"z B + {wd}*D[{kind},{db}]", evaluate_scores(lambda c: (1 - wd) * z(B(c)) + wd * z(D(c, kind, db)))))
