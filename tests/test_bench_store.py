"""`memstrata bench store`: every figure of one run is there, on the same texts (no timings
are asserted)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from memstrata.bench.store import run
from memstrata.cli import cli


def test_store_bench_reports_rates_rss_and_recall_beside_the_query_embedding(
        tmp_path: Path) -> None:
    res = run(sizes=(20, 60), texts=40, single=10, batch=16, repeats=1,
              workdir=tmp_path / "w", embedder="hash")
    assert res["texts"] == 40 and res["single"] == 10
    for key in ("embed_batched_per_s", "append_single_per_s", "append_batched_per_s",
                "append_batched_vs_single", "append_batched_vs_embedder",
                "append_many_peak_rss_mb", "peak_rss_mb"):
        assert res[key] > 0, key
    assert list(res["sizes"]) == ["20", "60"]
    for size, row in res["sizes"].items():
        assert row["episodes"] == int(size)
        assert row["recall_p50_ms"] > 0 and row["embed_query_p50_ms"] > 0
        assert row["recall_vs_embed"] > 0


def test_store_bench_without_an_embedder_times_the_store_alone(tmp_path: Path) -> None:
    res = run(sizes=(30,), texts=50, single=5, batch=20, repeats=1, workdir=tmp_path / "w")
    assert res["embedder"] is None and "embed_batched_per_s" not in res
    assert res["sizes"]["30"]["episodes"] == 30 and "recall_p50_ms" not in res["sizes"]["30"]
    assert res["append_batched_per_s"] > 0  # all 50 texts, though the largest size is 30


def test_store_bench_cli_prints_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "store.json"
    result = CliRunner().invoke(cli, ["bench", "store", "--embedder", "hash", "--sizes", "15",
                                      "--texts", "20", "--single", "5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "recall / embed" in result.output and "append_many" in result.output
    assert out.exists()
