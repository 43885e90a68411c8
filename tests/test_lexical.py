"""Which words a query over a large index keeps (:func:`memstrata.store.lexical.selective`)
and how the per-process memory of the caller's counts holds (:class:`TermCounts`)."""

from __future__ import annotations

from datetime import UTC, datetime

from memstrata.store.lexical import TermCounts, cjk_pairs, filter_key, selective, terms

COMMON = 10


def test_common_words_go_while_a_rarer_one_matches() -> None:
    table = {"deploy": 50, "kafka": 3, "zebra": 0}

    def count(word: str) -> int:
        return min(table.get(word, 0), COMMON)

    assert selective(["deploy", "kafka", "zebra"], COMMON, count) == ["kafka"]
    assert selective(["deploy", "zebra"], COMMON, count) == ["deploy"]
    assert selective(["deploy", "zebra"], COMMON, count, all_common="drop") == []
    assert selective(["kafka", "zebra"], COMMON, count) == ["kafka"]


def test_a_bound_spares_the_callers_count_but_never_decides_for_them() -> None:
    mine = {"deploy": 50, "kafka": 0}  # kafka is only in another user's rows
    everyone = {"deploy": 60, "kafka": 4, "upgrade": 2}
    asked: list[str] = []

    def count(word: str) -> int:
        asked.append(word)
        return min(mine.get(word, 0), COMMON)

    def bound(word: str) -> int:
        return min(everyone.get(word, 0), COMMON)

    # no word is common for anyone: nothing of the caller's is counted
    assert selective(["kafka", "upgrade"], COMMON, count, bound=bound) == ["kafka", "upgrade"]
    assert asked == []
    # deploy is common: kafka must match the caller's rows to replace it, and does not
    assert selective(["deploy", "kafka"], COMMON, count, bound=bound) == ["deploy"]
    assert selective(["deploy", "kafka"], COMMON, count, bound=bound,
                     all_common="drop") == []
    assert set(asked) == {"deploy", "kafka"}


def test_term_counts_hold_while_the_index_grows_by_less_than_a_tenth() -> None:
    calls: list[str] = []

    def count(word: str) -> int:
        calls.append(word)
        return 7

    memory = TermCounts()
    key = filter_key("episodes", "r.tenant = ?", ["default", datetime(2026, 1, 1, tzinfo=UTC)])
    # times to the hour: the same filter within the hour (an expiry test's "now"), another
    # at the next hour or for another window
    assert key == filter_key("episodes", "r.tenant = ?",
                             ["default", datetime(2026, 1, 1, 0, 59, 59, tzinfo=UTC)])
    assert key != filter_key("episodes", "r.tenant = ?",
                             ["default", datetime(2026, 1, 1, 1, tzinfo=UTC)])
    assert key != filter_key("episodes", "r.tenant = ?", ["other"])
    counter = memory.counter(key, 100_000, count)
    assert counter("deploy") == 7 and counter("deploy") == 7
    assert calls == ["deploy"]
    assert memory.counter(key, 105_000, count)("deploy") == 7 and calls == ["deploy"]
    assert memory.counter(key, 120_000, count)("deploy") == 7 and calls == ["deploy"] * 2
    assert memory.counter(filter_key("episodes", "r.tenant = ?", ["other"]), 120_000,
                          count)("deploy") == 7 and len(calls) == 3


def test_a_cjk_run_is_taken_as_its_overlapping_pairs() -> None:
    """Chinese and Japanese put no spaces between words: a run longer than two characters
    is its overlapping pairs, a shorter one is kept whole, Latin pieces stay words; a
    query's function words (CJK_STOP_WORDS) are left out."""
    assert cjk_pairs("为什么部署失败") == ["为什", "什么", "么部", "部署", "署失", "失败"]
    # question words go; the ranker's evidence also leaves out the pairs beside them and
    # those holding a particle, which mostly straddle two words (still searched: 酒吧, 目的)
    assert terms("为什么部署失败？") == ["么部", "部署", "署失", "失败"]
    assert terms("为什么部署失败？", evidence=True) == ["部署", "署失", "失败"]
    assert terms("缓存什么时候过期") == ["缓存", "存什", "候过", "过期"]  # not 么时
    assert terms("缓存什么时候过期", evidence=True) == ["缓存", "过期"]
    assert terms("晚上的部署", evidence=True) == ["晚上", "部署"]
    assert terms("酒吧几点开门")[:1] == ["酒吧"]
    assert terms("周一下午") == ["周一", "一下", "下午"]
    assert terms("什么") == []
    assert terms("缓存") == ["缓存"]
    assert terms("redis缓存过期") == ["redis", "缓存", "存过", "过期"]
    assert cjk_pairs("v2版本") == ["v2", "版本"]
    assert terms("배포가 실패") == ["배포", "포가", "실패"]
    assert terms("The deploy failed") == ["deploy", "failed"]
