"""CLI: ``memstrata eval FIXTURES`` runs the memory evaluation harness.

Each fixture runs in its own temporary store (never the user's), so the
command takes no store options. Exit status 1 when any fixture fails, so it
can gate CI.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ._common import table


@click.command("eval")
@click.argument("fixtures", type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the JSON report to this file.")
@click.option("--embedder", default=None,
              help="Embedder spec for the fixture stores (minilm, hash, ...); default: none "
                   "(lexical only).")
@click.option("--ranker", default="default", show_default=True,
              help="default, similarity (a similarity-only baseline) or module:function.")
def eval_command(fixtures: Path, as_json: bool, out: Path | None, embedder: str | None,
                 ranker: str) -> None:
    """Run the fixtures in FIXTURES (a YAML file or a directory): recall, leaks, tokens."""
    from ..bench.evaluation import run_eval

    report = run_eval(fixtures, embedder=embedder, ranker=ranker)
    data = report.to_dict()
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        table(f"memstrata eval {fixtures} (ranker: {report.ranker})", report.COLUMNS,
              report.rows())
        t = data["total"]
        recall = f"{t['recall']:.2f}" if t["recall"] is not None else "-"
        click.echo(f"{t['passed']}/{t['fixtures']} fixtures pass; recall {recall}; "
                   f"leaks {t['leaks']}; tokens {t['tokens']}")
    if not report.passed:
        raise SystemExit(1)


def register(group: click.Group) -> None:
    group.add_command(eval_command)
