"""The projection's blind spot: agreement of the SQLite index's two-stage search (a 64-dim
projection scan, then an exact re-rank) with an exact search, for shares of the residual
bound added to the coarse score (``RESIDUAL_SHARE`` in ``memstrata.store.sqlite_vectors``).

Corpus: the dev split's turns, observations and summaries, topped up with stdlib docstring
sentences (read in place, nothing copied); queries: the first 400 dev questions. MiniLM
vectors; the projection fitted as the store fits it (uncentred SVD, top 64 directions).
Prints overlap@50 with the exact top 50 for re-ranking 250 and 500 candidates.
"""
import importlib
import json
import re
import sys

import numpy as np

from memstrata.providers.embeddings import get_embedder
from memstrata.store.sqlite_vectors import largest

DATA = "/work/shared/bench/locomo/locomo_dev.json"
TOP, DIMS = 50, 64


def corpus() -> tuple[list[str], list[str]]:
    with open(DATA) as f:
        convs = json.load(f)
    texts, questions = [], []
    for c in convs:
        for turns in c["conversation"].values():
            if isinstance(turns, list):
                texts += [f"{t.get('speaker', '')}: {t['text']}" for t in turns
                          if isinstance(t, dict) and t.get("text")]
        for key in ("observation", "session_summary", "event_summary"):
            blob = json.dumps(c.get(key, ""))
            texts += [s for s in re.split(r'(?<=[.!?])\s+|\\n|", "', blob) if 40 < len(s) < 300]
        questions += [q["question"] for q in c["qa"]]
    for name in sorted(sys.stdlib_module_names):
        if len(texts) > 22_000:
            break
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        for obj in [module] + [getattr(module, a, None) for a in dir(module)[:200]]:
            doc = getattr(obj, "__doc__", None)
            if isinstance(doc, str):
                texts += [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n\n", doc)
                          if 40 < len(s.strip()) < 300]
    return list(dict.fromkeys(texts))[:20_000], questions[:400]


def main() -> None:
    texts, questions = corpus()
    emb = get_embedder("minilm")
    X = np.asarray(emb.embed(texts), np.float32)
    Q = np.asarray(emb.embed(questions), np.float32)
    _, _, vt = np.linalg.svd(X[:: max(1, len(X) // 20_000)], full_matrices=False)
    proj = np.ascontiguousarray(vt[:DIMS].T)
    low = X @ proj
    resid = np.sqrt(np.maximum(0, 1 - np.einsum("ij,ij->i", low, low)))
    print(f"{len(X)} texts, {len(Q)} queries; residual length mean {resid.mean():.3f}")
    for rerank in (250, 500):
        for share in (0.0, 0.05, 0.1, 0.2, 0.3, 0.5):
            agree = []
            for q in Q:
                exact = set(np.argpartition(-(X @ q), TOP)[:TOP].tolist())
                lq = q @ proj
                keep = largest(low @ lq + share * np.sqrt(max(0, 1 - lq @ lq)) * resid, rerank)
                got = set(keep[np.argpartition(-(X[keep] @ q), TOP)[:TOP]].tolist())
                agree.append(len(exact & got) / TOP)
            a = np.array(agree)
            print(f"re-rank {rerank} share {share:.2f}: overlap@{TOP} {a.mean():.4f} "
                  f"(min {a.min():.2f}, below 1 in {np.mean(a < 1):.3f})")


if __name__ == "__main__":
    main()
