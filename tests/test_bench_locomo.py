"""LoCoMo benchmark harness: loader repairs, metrics and retrievers on a tiny conversation.

The conversation is built here (never read from the dev split), in the public ``locomo10.json``
layout, including the malformed evidence ids seen in the real data.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memstrata.bench.locomo import (
    BM25Retriever,
    DateWindow,
    RecipeConfig,
    RecipeRetriever,
    RRFRetriever,
    Turn,
    VectorRetriever,
    evaluate,
    format_table,
    load_locomo,
    normalise_evidence,
    parse_session_date,
    percentile,
    query_terms,
    question_date_window,
    recall_at,
    reciprocal_rank,
    render_turn,
    run,
)
from memstrata.errors import ValidationError
from memstrata.providers.embeddings import HashingEmbedder
from memstrata.tokens import count_tokens
from services import AppDatabase


def _turn(dia_id: str, speaker: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def _sample() -> dict[str, Any]:
    return {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Nate",
            "speaker_b": "Joanna",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                _turn("D1:1", "Nate", "Hey Joanna! I took my turtles to the beach in Tampa."),
                _turn("D1:2", "Joanna", "Awww! How long have you had the turtles?"),
                _turn("D1:3", "Nate", "Three years now, they bring me joy."),
                _turn(
                    "D1:4",
                    "Joanna",
                    "Look at my new script draft.",
                    img_url=["http://example.invalid/x.jpg"],
                    blip_caption="a photo of a notebook on a desk",
                    query="screenplay notebook",
                ),
            ],
            "session_2_date_time": "10:37 am on 27 June, 2023",
            "session_2": [
                _turn("D2:1", "Joanna", "I finished my screenplay about a haunted lighthouse!"),
                _turn("D2:2", "Nate", "Congrats! I won my fourth video game tournament."),
                _turn("D2:3", "Joanna", "Amazing, which game was it?"),
                _turn("D2:4", "Nate", "Street Fighter, at the local arcade."),
            ],
            # More date keys than sessions, as in the real data: sessions come from session_N.
            "session_3_date_time": "9:55 am on 22 October, 2023",
        },
        "qa": [
            {"question": "How long has Nate had his turtles?", "answer": "3 years",
             "evidence": ["D1:3"], "category": 4},
            {"question": "What did Joanna write about?", "answer": "a haunted lighthouse",
             "evidence": ["D2:1; D1:4"], "category": 1},
            {"question": "Which game did Nate win a tournament in?", "answer": "Street Fighter",
             "evidence": ["D:2:4", "D02:02"], "category": 2},
            {"question": "Where did Nate take his turtles?", "answer": "Tampa",
             "evidence": ["D1:1", "D9:9"], "category": 3},
            {"question": "What did Joanna say about Tampa?", "adversarial_answer": "nothing",
             "evidence": ["D1:1"], "category": 5},
            {"question": "An unanswerable one", "answer": "-", "evidence": [], "category": 1},
            {"question": "A broken one", "answer": "-", "evidence": ["D"], "category": 4},
        ],
        "observation": {"should": "never be read"},
        "session_summary": {"should": "never be read"},
    }


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo_test.json"
    path.write_text(json.dumps([_sample()]), encoding="utf-8")
    return path


def test_normalise_evidence_repairs_malformed_ids() -> None:
    assert normalise_evidence("D8:6; D9:17") == ["D8:6", "D9:17"]
    assert normalise_evidence("D:11:26") == ["D11:26"]
    assert normalise_evidence("D30:05") == ["D30:5"]
    assert normalise_evidence("D9:1 D4:4 D4:6") == ["D9:1", "D4:4", "D4:6"]
    assert normalise_evidence("D") == []


def test_parse_session_date_is_utc() -> None:
    when = parse_session_date("1:56 pm on 8 May, 2023")
    assert when == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_date("12:09 am on 13 September, 2023").hour == 0
    with pytest.raises(ValidationError):
        parse_session_date("yesterday-ish")


def test_loader_builds_sessions_and_counts_repairs(data_file: Path) -> None:
    convs, report = load_locomo(data_file)
    assert len(convs) == 1
    conv = convs[0]
    assert conv.speakers == ("Nate", "Joanna")
    assert [t.dia_id for t in conv.turns][:2] == ["D1:1", "D1:2"]
    assert {t.session for t in conv.turns} == {1, 2}  # no phantom session 3
    assert conv.turns[4].date == datetime(2023, 6, 27, 10, 37, tzinfo=UTC)
    assert conv.turns[3].caption == "a photo of a notebook on a desk"
    assert conv.turns[0].caption is None
    by_q = {q.question: q for q in conv.questions}
    assert by_q["What did Joanna write about?"].evidence == ("D2:1", "D1:4")
    assert by_q["Which game did Nate win a tournament in?"].evidence == ("D2:4", "D2:2")
    assert by_q["Where did Nate take his turtles?"].evidence == ("D1:1",)
    assert by_q["What did Joanna say about Tampa?"].answer == "nothing"
    assert report.skipped_questions == 2
    assert report.questions == 5
    assert report.turns == 8
    assert report.dropped_ids == ["conv-test:D9:9"]
    assert len(report.normalised_ids) == 4  # "D2:1; D1:4", "D:2:4", "D02:02", "D"


def test_loader_rejects_unreadable_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValidationError):
        load_locomo(bad)
    with pytest.raises(ValidationError):
        load_locomo(tmp_path / "missing.json")


def test_render_turn_carries_date_speaker_and_caption(data_file: Path) -> None:
    convs, _ = load_locomo(data_file)
    assert render_turn(convs[0].turns[3]) == (
        "[8 May 2023] Joanna: Look at my new script draft. [shares a photo of a notebook on a desk]"
    )


def test_metrics() -> None:
    ranked = ["a", "b", "c", "d"]
    assert recall_at(ranked, ["b", "z"], 1) == 0.0
    assert recall_at(ranked, ["b", "z"], 2) == 0.5
    assert recall_at(ranked, ["d", "a"], 4) == 1.0
    assert reciprocal_rank(ranked, ["c", "d"]) == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, ["z"]) == 0.0
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0
    assert percentile([], 50) == 0.0
    with pytest.raises(ValidationError):
        recall_at(ranked, [], 5)


def test_query_terms_and_date_windows() -> None:
    words = query_terms("What did Caroline's kids paint in May?")
    assert words == ["caroline", "kids", "paint", "may"]
    assert query_terms("How long has Nate had his turtles?", drop={"nate"}) == ["long", "turtles"]
    assert question_date_window("What did she do on 7 July, 2023?") == DateWindow(
        datetime(2023, 7, 7, tzinfo=UTC), datetime(2023, 7, 8, tzinfo=UTC)
    )
    window = question_date_window("Which classes did Evan join in August 2023?")
    assert window is not None
    assert window.contains(datetime(2023, 8, 31, 20, tzinfo=UTC))
    assert not window.contains(datetime(2023, 9, 5, tzinfo=UTC))
    assert window.contains(datetime(2023, 9, 2, tzinfo=UTC), slack=timedelta(days=3))
    assert question_date_window("When did Melanie go camping in June?") == DateWindow(month=6)
    # the modal "may" is not a month
    assert question_date_window("What may Nate like?") is None


class _Fixed:
    """A retriever with a fixed answer, to check the driver's arithmetic."""

    def __init__(self, order: list[str]) -> None:
        self.order = order

    def search(self, question: str, k: int) -> list[str]:
        return self.order[:k]


def test_evaluate_computes_recall_tokens_and_categories(data_file: Path) -> None:
    convs, _ = load_locomo(data_file)
    order = ["D1:3", "D2:1", "D2:4", "D1:1", "D1:4", "D2:2", "D1:2", "D2:3"]
    seen: list[tuple[str, int, int]] = []
    result = evaluate(
        convs,
        {"fixed": lambda turns: _Fixed(order)},
        ks=(1, 2, 5),
        progress=lambda name, done, total: seen.append((name, done, total)),
    )
    r = result["retrievers"]["fixed"]
    head = r["categories_1_4"]
    assert head["questions"] == 4
    # per question recall@1: q1 1, q2 0/2, q3 0/2, q4 0 -> 0.25
    assert head["recall@1"] == pytest.approx(0.25)
    # recall@2: q1 1, q2 1/2, q3 0, q4 0
    assert head["recall@2"] == pytest.approx(1.5 / 4)
    # recall@5: q1 1, q2 2/2, q3 1/2 (D2:4 yes, D2:2 no), q4 1
    assert head["recall@5"] == pytest.approx(3.5 / 4)
    assert head["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    assert r["category_5"]["questions"] == 1
    assert r["category_5"]["recall@5"] == 1.0
    assert r["per_category"]["1-multi-hop"]["recall@2"] == pytest.approx(0.5)
    by_id = {t.dia_id: t for t in convs[0].turns}
    top2 = sum(count_tokens(render_turn(by_id[d])) + 1 for d in order[:2])
    assert head["tokens@2"] == pytest.approx(top2)
    whole = result["conversation_tokens"]["conv-test"]
    assert head["token_share@2"] == pytest.approx(top2 / whole)
    assert 0 < r["latency_ms"]["p50"] <= r["latency_ms"]["p95"]
    assert seen == [("fixed", 5, 5)]
    assert "fixed" in format_table(result)


def test_baselines_and_recipe_retrieve_by_their_own_signals(data_file: Path) -> None:
    convs, _ = load_locomo(data_file)
    turns = convs[0].turns
    emb = HashingEmbedder()
    bm25 = BM25Retriever(turns)
    assert bm25.search("Street Fighter arcade", 3)[0] == "D2:4"
    assert bm25.search("zebra", 3) == []
    assert VectorRetriever(turns, emb).search("Street Fighter, at the local arcade.", 1) == ["D2:4"]
    assert RRFRetriever(turns, emb).search("haunted lighthouse screenplay", 1) == ["D2:1"]
    recipe = RecipeRetriever(turns, emb)
    # The answer turn shares no content word with the question: it is found through
    # its preceding turn (contextual index) and its speaker being the one named.
    assert "D1:3" in recipe.search("How long has Nate had his turtles?", 2)
    no_context = RecipeRetriever(
        turns, emb, RecipeConfig(lexical_before=0, lexical_after=0, dense_before=0, dense_after=0,
                                 speaker_boost=0.0, dense_weight=0.0)
    )
    assert "D1:3" not in no_context.search("How long has Nate had his turtles?", 2)


def test_recipe_date_boost_prefers_the_named_month() -> None:
    may = datetime(2023, 5, 8, tzinfo=UTC)
    june = datetime(2023, 6, 27, tzinfo=UTC)
    turns = [
        Turn("D1:1", 1, may, "Ann", "I went hiking with my dog."),
        Turn("D2:1", 2, june, "Ann", "I went hiking with my dog."),
    ]
    cfg = RecipeConfig(dense_weight=0.0)
    recipe = RecipeRetriever(turns, HashingEmbedder(), cfg)
    assert recipe.search("Where did Ann go hiking in June 2023?", 1) == ["D2:1"]
    assert recipe.search("Where did Ann go hiking in May 2023?", 1) == ["D1:1"]


def test_run_end_to_end_with_minilm(data_file: Path) -> None:
    result = run(data_file, embedder="minilm", ks=(1, 5))
    assert set(result["retrievers"]) == {"memstrata", "memstrata-history", "memstrata-turns",
                                         "memstrata-turns-history", "bm25", "vector", "rrf",
                                         "recipe"}
    assert result["load"]["skipped_questions"] == 2
    recipe = result["retrievers"]["recipe"]["categories_1_4"]
    assert 0.0 <= recipe["recall@1"] <= recipe["recall@5"] <= 1.0
    # the store itself (episodes + recall gate) answers through the same harness
    store = result["retrievers"]["memstrata"]["categories_1_4"]
    assert 0.0 < store["recall@5"] <= 1.0
    # and the agent tool search_history ranks exactly as recall does
    history = result["retrievers"]["memstrata-history"]["categories_1_4"]
    assert {k: history[k] for k in ("recall@1", "recall@5", "mrr")} == {
        k: store[k] for k in ("recall@1", "recall@5", "mrr")}
    # one provenance ref per turn with the session as thread: the same threading, both paths
    turns = result["retrievers"]["memstrata-turns"]["categories_1_4"]
    turns_history = result["retrievers"]["memstrata-turns-history"]["categories_1_4"]
    assert {k: turns[k] for k in ("recall@1", "recall@5", "mrr")} == {
        k: store[k] for k in ("recall@1", "recall@5", "mrr")} == {
        k: turns_history[k] for k in ("recall@1", "recall@5", "mrr")}
    # 8 turns and k=5: the top 5 hold most but not all of the conversation
    assert 0.3 < recipe["token_share@5"] < 1.0
    json.dumps(result)  # JSON-ready


def test_tokenizer_spec_is_validated(data_file: Path) -> None:
    convs, _ = load_locomo(data_file)
    with pytest.raises(ValidationError):
        BM25Retriever(convs[0].turns, tokenizer="porter'); DROP TABLE t; --")
    with pytest.raises(ValidationError):
        BM25Retriever([])


@pytest.mark.postgres
def test_the_store_paths_run_on_postgresql_and_leave_nothing_behind(
        data_file: Path, pg_database: AppDatabase) -> None:
    """``bench locomo --url``: the same store paths on another engine, each conversation
    under a user of its own, forgotten afterwards."""
    names = ["memstrata-turns", "memstrata-turns-history"]
    on_sqlite = run(data_file, embedder="minilm", names=names, ks=(1, 5))
    on_pg = run(data_file, embedder="minilm", names=names, ks=(1, 5),
                url=pg_database.owner_url)
    assert on_pg["store"] == "postgresql" and on_sqlite["store"].startswith("sqlite")
    for name in names:
        pg, lite = (r["retrievers"][name]["categories_1_4"] for r in (on_pg, on_sqlite))
        assert 0.0 < pg["recall@5"] <= 1.0
        assert abs(pg["recall@5"] - lite["recall@5"]) <= 0.25  # the same ranker, two engines
    with psycopg.connect(pg_database.admin_url) as conn:
        left = conn.execute("SELECT (SELECT count(*) FROM episodes), "
                            "(SELECT count(*) FROM vectors)").fetchone()
    assert left == (0, 0)
