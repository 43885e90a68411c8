"""Grid over BM25 context width / column weights / speaker boost (robustness check)."""
from exp03_speaker import bm, named_mask
from lab import evaluate_scores, fmt

if __name__ == "__main__":
    for ctx in [(1, 1), (2, 1), (2, 2), (3, 1), (3, 2), (3, 3), (4, 2)]:
        for w in [(1, 0.3, 0.1), (1, 0.5, 0.2), (1, 0.5, 0.3), (1, 0.7, 0.3), (1, 0.4, 0.4)]:
            print(fmt(f"ctx={ctx} w={w} boost=0.5", evaluate_scores(lambda c: bm(c, *ctx, w, True) * (1 + 0.5 * named_mask(c)))))
