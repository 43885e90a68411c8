"""Causal context (only previous turns, what a store knows at append time) vs two-sided."""
from exp03_speaker import bm, named_mask
from exp04_dense import dense
from exp05_fusion import z
from lab import evaluate_scores, fmt

if __name__ == "__main__":
    for ctx, w in [((1, 0), (1, 0.5, 0)), ((2, 0), (1, 0.5, 0)), ((2, 0), (1, 0.3, 0)), ((3, 0), (1, 0.5, 0)),
                   ((2, 0), (1, 0.7, 0)), ((2, 2), (1, 0.5, 0.2))]:
        Bf = lambda c: bm(c, *ctx, w, True) * (1 + 0.5 * named_mask(c))
        print(fmt(f"B ctx={ctx} w={w}", evaluate_scores(Bf)))
        for dk in ("ctx1_0", "ctx1_1"):
            print(fmt(f"   + z0.5 D[{dk}]", evaluate_scores(lambda c: 0.5 * z(Bf(c)) + 0.5 * z(dense(c, dk) + 0.2 * named_mask(c)))))
