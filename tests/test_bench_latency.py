"""`memstrata bench latency`: a store filled in two runs holds every text once, and a
measuring run (``--n 0``) reports the first query after open (no timings are asserted)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from memstrata import ConfigError, ValidationError
from memstrata.bench.latency import run
from memstrata.cli import cli


def test_a_second_run_from_start_grows_the_store_with_new_texts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lat.db'}"
    first = run(30, url=url, embedder="hash", batch=8, repeats=1)
    grown = run(20, url=url, embedder="hash", batch=8, repeats=1, start=30)
    assert (first["episodes"], first["added"]) == (30, 30)
    assert (grown["episodes"], grown["added"], grown["start"]) == (50, 20, 30)
    with sqlite3.connect(tmp_path / "lat.db") as conn:
        texts = [t for (t,) in conn.execute("SELECT text FROM episodes")]
    assert len(texts) == len(set(texts)) == 50  # nothing of the first run repeats
    again = run(0, url=url, embedder="hash", repeats=2)
    assert again["added"] == 0 and again["episodes"] == 50
    # only a measuring run reports the first query after open (a filling run opened the
    # store before it wrote); the figure itself is a timing, rounded to 10 ms
    assert first["open_first_query_s"] is None and again["open_first_query_s"] is not None
    assert again["recall_later_passes_p95_ms"] is not None
    with pytest.raises(ValidationError):
        run(5, url=url, embedder="hash", start=-1)
    with sqlite3.connect(tmp_path / "lat.db") as conn:
        assert conn.execute("SELECT count(*) FROM episodes").fetchone() == (50,)


def test_latency_cli_prints_a_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "latency.json"
    result = CliRunner().invoke(cli, ["bench", "latency", "--n", "12", "--embedder", "hash",
                                      "--url", f"sqlite:///{tmp_path / 'l.db'}",
                                      "--start", "5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "recall p95 ms" in result.output and "open+first s" in result.output
    assert json.loads(out.read_text())["start"] == 5


def test_a_run_leaves_no_directory_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          ) -> None:
    """A run on a store a URL names makes no directory of its own; one without a URL
    removes its temporary store, also when it fails (a bad embedder name)."""
    spare = tmp_path / "tmp"
    spare.mkdir()
    monkeypatch.setenv("TMPDIR", str(spare))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again

    def left() -> list[Path]:
        return list(spare.glob("memstrata-latency-*"))

    run(6, url=f"sqlite:///{tmp_path / 'named.db'}", embedder="hash", batch=4, repeats=1)
    assert (tmp_path / "named.db").exists() and left() == []
    done = run(6, embedder="hash", batch=4, repeats=1)
    assert done["episodes"] == 6 and left() == []
    with pytest.raises(ConfigError):
        run(6, embedder="no-such-embedder", repeats=1)
    assert left() == []
