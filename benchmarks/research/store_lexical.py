"""The store without an embedder (lexical ranking only) on the LoCoMo dev split: turns
stored one provenance ref each with the session as thread, through recall and through the
agents' search_history, scored by the real harness."""
import json

from memstrata.bench.locomo import evaluate, load_locomo
from memstrata.bench.locomo_store import StoreRetriever

convs, _ = load_locomo("/work/shared/bench/locomo/locomo_dev.json")
res = evaluate(convs, {
    "store-lexical": lambda turns: StoreRetriever(turns, None, path="recall", storage="per-turn"),
    "store-lexical-history": lambda turns: StoreRetriever(turns, None, path="search_history",
                                                          storage="per-turn")}, ks=(5, 10, 20))
for name, r in res["retrievers"].items() if "retrievers" in res else res.items():
    print(name, json.dumps(r)[:600])
