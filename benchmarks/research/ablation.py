"""Ablation of the recipe through the real harness (memstrata.bench.locomo.evaluate).

Run: .venv/bin/python benchmarks/research/ablation.py [--data PATH]
Vectors (documents and queries) are cached in /tmp so reruns take seconds; latency figures
here are therefore meaningless: the CLI run (`python -m memstrata.bench.locomo`) measures them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from memstrata.bench.locomo import (
    BM25Retriever,
    RecipeConfig,
    RecipeRetriever,
    RetrieverFactory,
    RRFRetriever,
    Turn,
    VectorRetriever,
    evaluate,
    load_locomo,
)
from memstrata.embeddings import MiniLMEmbedder

CACHE = Path("/tmp/memstrata_locomo_vectors.pkl")
DATA = "/work/shared/bench/locomo/locomo_dev.json"


class DiskCachedEmbedder:
    """MiniLM with every vector (documents and queries) memoised on disk."""

    def __init__(self) -> None:
        self.inner = MiniLMEmbedder()
        self.model_name = self.inner.model_name
        self.dims = self.inner.dims
        self.cache: dict[str, np.ndarray] = (
            pickle.loads(CACHE.read_bytes()) if CACHE.exists() else {}
        )
        self.dirty = False

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if self._key(t) not in self.cache))
        if missing:
            for text, vec in zip(missing, self.inner.embed(missing), strict=True):
                self.cache[self._key(text)] = vec
            self.dirty = True
        return np.stack([self.cache[self._key(t)] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def save(self) -> None:
        if self.dirty:
            CACHE.write_bytes(pickle.dumps(self.cache))


BASE = RecipeConfig()
VARIANTS: dict[str, RecipeConfig] = {
    "recipe": BASE,
    "- date boost": replace(BASE, date_boost=0.0),
    "- speaker boost": replace(BASE, speaker_boost=0.0),
    "- speaker & date boosts": replace(BASE, speaker_boost=0.0, date_boost=0.0),
    "- dense leg": replace(BASE, dense_weight=0.0),
    "- lexical leg": replace(BASE, lexical_weight=0.0),
    "- lexical context": replace(BASE, lexical_before=0, lexical_after=0),
    "- dense context": replace(BASE, dense_before=0, dense_after=0),
    "- all context": replace(BASE, lexical_before=0, lexical_after=0, dense_before=0,
                             dense_after=0),
    "causal (previous turns only)": replace(BASE, lexical_after=0, dense_after=0),
    "unicode61 (no stemming)": replace(BASE, tokenizer="unicode61"),
}


def factories(emb: DiskCachedEmbedder) -> dict[str, RetrieverFactory]:
    out: dict[str, RetrieverFactory] = {
        "bm25 (unicode61)": BM25Retriever,
        "bm25 (porter)": lambda turns: BM25Retriever(turns, "porter unicode61"),
        "vector": lambda turns: VectorRetriever(turns, emb),
        "rrf": lambda turns: RRFRetriever(turns, emb),
    }
    for name, cfg in VARIANTS.items():
        out[name] = _recipe(emb, cfg)
    return out


def _recipe(emb: DiskCachedEmbedder, cfg: RecipeConfig) -> RetrieverFactory:
    def build(turns: Sequence[Turn]) -> RecipeRetriever:
        return RecipeRetriever(turns, emb, cfg)

    return build


def row(name: str, r: dict[str, Any]) -> str:
    h = r["categories_1_4"]
    cat = r["per_category"]
    return (
        f"| {name} | {h['recall@5']:.3f} | {h['recall@10']:.3f} | {h['recall@20']:.3f} "
        f"| {cat['1-multi-hop']['recall@10']:.3f} | {cat['2-temporal']['recall@10']:.3f} "
        f"| {cat['3-open-domain']['recall@10']:.3f} | {cat['4-single-hop']['recall@10']:.3f} "
        f"| {r['category_5']['recall@10']:.3f} | {h['mrr']:.3f} "
        f"| {100 * h['token_share@10']:.2f}% |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--out", default="/tmp/locomo_ablation.json")
    args = parser.parse_args()
    convs, _ = load_locomo(args.data)
    emb = DiskCachedEmbedder()
    result = evaluate(convs, factories(emb))
    emb.save()
    Path(args.out).write_text(json.dumps(result, indent=2))
    print("| retriever | R@5 | R@10 | R@20 | multi-hop | temporal | open-dom. | single-hop "
          "| cat-5 | MRR | share@10 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in result["retrievers"].items():
        print(row(name, r))
    print()
    print("| retriever | " + " | ".join(result["conversations"]) + " |")
    print("|---|" + "---|" * len(result["conversations"]))
    for name, r in result["retrievers"].items():
        per = r["per_conversation_1_4"]
        print(f"| {name} | " + " | ".join(f"{per[c]['recall@10']:.3f}"
                                         for c in result["conversations"]) + " |")


if __name__ == "__main__":
    main()
