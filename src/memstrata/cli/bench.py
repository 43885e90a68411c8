"""CLI: ``memstrata bench store|latency|locomo`` — figures printed and written as JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ._common import table


def _progress() -> tuple[Any, Callable[[str, int, int], None]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress("[progress.description]{task.description}", BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn(), transient=True)
    tasks: dict[str, Any] = {}

    def update(label: str, done: int, total: int) -> None:
        if label not in tasks:
            tasks[label] = bar.add_task(label, total=total)
        bar.update(tasks[label], completed=done, total=total)

    return bar, update


def _write(result: dict[str, Any], out: str, as_json: bool) -> None:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2))
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(f"wrote {path}")


@click.group()
def bench() -> None:
    """Benchmarks: print figures and write JSON (tests never assert timings)."""


@bench.command("store")
@click.option("--sizes", default="10000,100000", show_default=True,
              help="Store sizes at which search (and, with an embedder, recall) is timed.")
@click.option("--texts", type=int, default=10_000, show_default=True,
              help="Texts whose writes are timed: one by one, with append_many and (with an "
                   "embedder) by the embedder alone, the same texts each time.")
@click.option("--single", type=int, default=None,
              help="Append only the first N texts one by one (default: all of --texts).")
@click.option("--out", default="bench-results/store.json", show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.option("--embedder", default=None,
              help="Embed every write (e.g. minilm) and report the embedder's own batched rate "
                   "on the same texts, and recall beside embedding the query alone; default "
                   "none (the store on its own).")
def bench_store(sizes: str, texts: int, single: int | None, out: str, as_json: bool,
                embedder: str | None) -> None:
    """Episode append throughput and search latency on SQLite."""
    from ..bench.store import run

    bar, update = _progress()
    with bar:
        res = run(sizes=[int(s) for s in sizes.split(",")], single=single, texts=texts,
                  progress=update, embedder=embedder)
    if not as_json:
        semantic = res.get("embed_batched_per_s") is not None
        headers = ["episodes", "search p50 ms", "search p95 ms", "db MB"]
        if semantic:
            headers += ["recall p50 ms", "query embed p50 ms", "recall / embed"]
        rows = []
        for v in res["sizes"].values():
            row = [v["episodes"], v["search_p50_ms"], v["search_p95_ms"],
                   f"{v['db_bytes'] / 1e6:.1f}"]
            if semantic:
                row += [v["recall_p50_ms"], v["embed_query_p50_ms"], v["recall_vs_embed"]]
            rows.append(row)
        table("store benchmark", headers, rows)
        click.echo(f"append on the same {res['texts']:,} texts: "
                   f"{res['append_single_per_s']}/s one by one ({res['single']:,} texts), "
                   f"{res['append_batched_per_s']}/s with append_many "
                   f"(x{res.get('append_batched_vs_single')}); append_many peak RSS "
                   f"{res['append_many_peak_rss_mb']} MB, process peak {res['peak_rss_mb']} MB")
        if semantic:
            click.echo(f"the embedder alone, batched on the same texts: "
                       f"{res['embed_batched_per_s']}/s ({res['embedder']}); append_many "
                       f"runs at x{res.get('append_batched_vs_embedder')} of it")
    _write(res, out, as_json)


@bench.command("latency")
@click.option("--n", "n", type=int, default=100_000, show_default=True,
              help="Episodes to add; 0 measures the store at --url in this new process.")
@click.option("--url", default=None, help="Store to fill (default: a fresh SQLite file).")
@click.option("--embedder", default="minilm", show_default=True)
@click.option("--distinct", type=int, default=None,
              help="Distinct texts (default n); past them texts repeat with new dates, so a "
                   "1M store needs only this many embeddings.")
@click.option("--query-embedder", default=None,
              help="Embed each query with this model too, for its cost (e.g. minilm over a "
                   "store filled with hash:384 vectors).")
@click.option("--start", type=int, default=0, show_default=True,
              help="Begin at this synthetic episode: grow a store an earlier run filled with "
                   "that many (e.g. 100k to 1M) without repeating its texts.")
@click.option("--out", default="bench-results/latency.json", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def bench_latency(n: int, url: str | None, embedder: str, distinct: int | None,
                  query_embedder: str | None, start: int, out: str, as_json: bool) -> None:
    """Write throughput with embeddings, recall p50/p95, peak RSS, DB size."""
    from ..bench.latency import run

    bar, update = _progress()
    with bar:
        res = run(n, url=url, embedder=embedder, distinct=distinct, progress=update,
                  query_embedder=query_embedder, start=start)
    if not as_json:
        table(f"recall latency at {res['episodes']:,} episodes ({res['backend']})",
              ["write/s", "open+first s", "recall p50 ms", "recall p95 ms",
               "p95 1st pass", "p95 later", "query embed p50 ms", "peak RSS MB", "db MB"],
              [[res["write_per_s"], res["open_first_query_s"], res["recall_p50_ms"],
                res["recall_p95_ms"], res["recall_first_pass_p95_ms"],
                res["recall_later_passes_p95_ms"], res["embed_query_p50_ms"],
                res["peak_rss_mb"], f"{(res['db_bytes'] or 0) / 1e6:.1f}"]])
    _write(res, out, as_json)


@bench.command("forget")
@click.option("--n", "n", type=int, default=100_000, show_default=True,
              help="Episodes to add before the forgets (0 with --url: measure the store "
                   "an earlier run filled there).")
@click.option("--url", default=None, help="Store to fill (default: a fresh SQLite file).")
@click.option("--embedder", default="hash", show_default=True,
              help="Embedder for the fill (the cost measured is the store's; vectors are "
                   "stored either way).")
@click.option("--trials", type=int, default=20, show_default=True,
              help="Single-record forgets per kind (episode, fact).")
@click.option("--out", default="bench-results/forget.json", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def bench_forget(n: int, url: str | None, embedder: str, trials: int, out: str,
                 as_json: bool) -> None:
    """Time forgetting one record (episode with thread neighbours, fact with history)."""
    from ..bench.forget import run

    bar, update = _progress()
    with bar:
        res = run(n, url=url, embedder=embedder, trials=trials, progress=update)
    if not as_json:
        table(f"forget one record at {res['episodes']:,} episodes ({res['backend']})",
              ["kind", "p50 ms", "p95 ms", "max ms", "trials"],
              [[k, res.get(f"forget_{k}_p50_ms"), res.get(f"forget_{k}_p95_ms"),
                res.get(f"forget_{k}_max_ms"), res.get(f"forget_{k}_trials")]
               for k in ("episode", "fact", "match")])
        print(f"one call: {res['split_total_ms']} ms, of which compaction "
              f"{res['split_compact_ms']} ms")
    _write(res, out, as_json)


@bench.command("serve")
@click.option("--url", required=True, help="Store to serve (a PostgreSQL URL for the team "
                                           "setup; sqlite:///path works too).")
@click.option("--clients", type=int, default=16, show_default=True)
@click.option("--requests", "requests_", type=int, default=200, show_default=True,
              help="Requests per client (half recall, half facts propose).")
@click.option("--users", type=int, default=4, show_default=True)
@click.option("--per-user", type=int, default=2000, show_default=True,
              help="Episodes seeded per user before the run.")
@click.option("--embedder", default="minilm", show_default=True)
@click.option("--out", default="bench-results/serve.json", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def bench_serve(url: str, clients: int, requests_: int, users: int, per_user: int,
                embedder: str, out: str, as_json: bool) -> None:
    """Concurrent clients against `memstrata serve`: rps, p95 and the server's peak RSS."""
    from ..bench.serve_load import run

    res = run(url, clients=clients, requests=requests_, users=users, per_user=per_user,
              embedder=None if embedder == "none" else embedder)
    if not as_json:
        table(f"memstrata serve, {clients} clients ({res['url']})",
              ["operation", "requests", "rps", "p50 ms", "p95 ms", "p99 ms", "status"],
              [[op, v["requests"], v["rps"], v["p50_ms"], v["p95_ms"], v["p99_ms"],
                v["status"]] for op, v in res["ops"].items()])
        click.echo(f"server peak RSS {res['server_peak_rss_mb']} MB; "
                   f"{res['total_rps']} requests/s in all")
    _write(res, out, as_json)


@bench.command("locomo")
@click.option("--data", required=True, type=click.Path(exists=True, dir_okay=False),
              help="locomo_dev.json (e.g. ../shared/bench/locomo/locomo_dev.json).")
@click.option("--retrievers", default="memstrata,bm25,vector,rrf,recipe", show_default=True,
              help="memstrata = the store and its recall gate; memstrata-history = the same store "
                   "through the agent tool search_history; memstrata-turns and "
                   "memstrata-turns-history store one provenance ref per turn with the session "
                   "as thread (store retrievers are scored on what each k call returns); the "
                   "rest are baselines and the standalone reference recipe.")
@click.option("--embedder", default="minilm", show_default=True)
@click.option("--url", default=None,
              help="Keep the store retrievers' conversations in this database (e.g. "
                   "postgresql://...), each under a user of its own in the tenant "
                   "locomo-bench, forgotten afterwards; default: a temporary SQLite file each.")
@click.option("--out", default="bench-results/locomo.json", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def bench_locomo(data: str, retrievers: str, embedder: str, url: str | None, out: str,
                 as_json: bool) -> None:
    """Evidence recall@5/10/20 per category, MRR, prompt tokens, latency on LoCoMo."""
    from ..bench.locomo import TABLE_HEADERS, run, table_rows

    bar, update = _progress()
    with bar:
        res = run(data, embedder=embedder, names=retrievers.split(","), progress=update,
                  url=url)
    if not as_json:
        table("LoCoMo evidence retrieval (categories 1-4 unless named)", TABLE_HEADERS,
              table_rows(res))
    _write(res, out, as_json)


def register(group: click.Group) -> None:
    group.add_command(bench)
