"""The store's LoCoMo R@10 (``memstrata`` mode, dev split) at several ``NEIGHBOUR_SHARE``
values: ``python benchmarks/research/store_share.py [DATA] [SHARE ...]``."""

from __future__ import annotations

import sys
import time

import memstrata.retrieval.episode_ranking as ranking
from memstrata.bench import locomo
from memstrata.providers.embeddings import get_embedder

DATA = "/work/shared/bench/locomo/locomo_dev.json"


def main(argv: list[str]) -> None:
    data = argv[0] if argv else DATA
    shares = [float(a) for a in argv[1:]] or [0.3, 0.4, 0.5]
    emb = locomo._DocumentCache(get_embedder("minilm"))  # one embedding of the turns
    for share in shares:
        ranking.NEIGHBOUR_SHARE = share
        t0 = time.perf_counter()
        res = locomo.run(data, embedder=emb, names=["memstrata"], ks=(10,))["retrievers"]
        r = res["memstrata"]
        multi = r["per_category"].get("1-multi-hop", {}).get("recall@10", 0.0)
        print(f"share {share:.2f}  R@10 {r['categories_1_4']['recall@10']:.3f}  "
              f"multi-hop {multi:.3f}  cat-5 {r['category_5']['recall@10']:.3f}  "
              f"MRR {r['categories_1_4']['mrr']:.3f}  ({time.perf_counter() - t0:.0f} s)",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
