"""Fusion formulas a store can compute from its candidate lists; speaker boost applied after fusion."""
import numpy as np
from exp03_speaker import bm, named_mask
from exp04_dense import dense
from exp05_fusion import rrf, z
from lab import evaluate_scores, fmt


def Braw(c):
    return bm(c, 2, 2, (1, 0.5, 0.2), True)


def Draw(c):
    return dense(c, "ctx1_1")


def maxnorm(m):
    return m / np.maximum(m.max(1, keepdims=True), 1e-9)


def topz(m, n=50):
    """z-score using mean/std of the top-n values only (what a top-n candidate list can give)."""
    top = -np.sort(-m, axis=1)[:, :n]
    return (m - top.mean(1, keepdims=True)) / np.maximum(top.std(1, keepdims=True), 1e-9)


def mm_top(m, n=50):
    top = -np.sort(-m, axis=1)[:, :n]
    lo = top[:, -1:]; hi = top[:, :1]
    return np.clip((m - lo) / np.maximum(hi - lo, 1e-9), 0, None)


if __name__ == "__main__":
    print(fmt("ref z(B*1.5n)+z(D+.2n)", evaluate_scores(lambda c: 0.5 * z(Braw(c) * (1 + 0.5 * named_mask(c))) + 0.5 * z(Draw(c) + 0.2 * named_mask(c)))))
    for beta in (0.5, 1.0, 1.5):
        print(fmt(f"z(B)+z(D)+{beta}n", evaluate_scores(lambda c: 0.5 * z(Braw(c)) + 0.5 * z(Draw(c)) + beta * named_mask(c))))
    for a, beta in [(0.5, 0.2), (0.5, 0.3), (0.6, 0.2), (0.6, 0.3), (0.7, 0.2)]:
        print(fmt(f"{a}maxnorm(B)+{1-a:.1f}cos+{beta}n", evaluate_scores(lambda c: a * maxnorm(Braw(c)) + (1 - a) * Draw(c) + beta * named_mask(c))))
    for n in (20, 50, 100):
        for beta in (0.3, 0.5):
            print(fmt(f"mm_top{n} +{beta}n", evaluate_scores(lambda c: 0.5 * mm_top(Braw(c), n) + 0.5 * mm_top(Draw(c), n) + beta * named_mask(c))))
            print(fmt(f"topz{n} +{beta*2}n", evaluate_scores(lambda c: 0.5 * topz(Braw(c), n) + 0.5 * topz(Draw(c), n) + beta * 2 * named_mask(c))))
    for wd in (0.5, 0.7, 1.0):
        for beta in (0.005, 0.01):
            print(fmt(f"rrf(B,{wd}D)+{beta}n", evaluate_scores(lambda c: rrf([Braw(c), Draw(c)], [1, wd]) + beta * named_mask(c))))
