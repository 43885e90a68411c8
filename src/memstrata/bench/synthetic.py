"""Synthetic but realistic episodes for benchmarks (deterministic for a seed).

Events look like what a coding/ops agent logs: deploys, reviews, incidents,
meetings, customer requests — with people, systems, versions and outcomes
drawn from small vocabularies, so lexical and vector search see realistic
term overlap rather than random noise.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

PEOPLE = ["Alice", "Bob", "Carol", "Dmitri", "Esther", "Farid", "Grace", "Hiro", "Ines",
          "Jonas", "Keiko", "Luis", "Mara", "Nadia", "Omar", "Priya"]
SYSTEMS = ["billing-api", "docs-site", "search-cluster", "auth-service", "payments",
           "mobile-app", "data-warehouse", "CI runners", "staging", "the CDN", "postgres-main",
           "redis-cache", "notification-worker", "admin console", "export job"]
TEMPLATES = [
    ("deploy_succeeded", "Deployed {sys} {ver} to production after {person} approved the "
                         "change; rollout took {n} minutes."),
    ("deploy_failed", "Deploy of {sys} {ver} failed: {cause}. {person} rolled back and opened "
                      "a ticket."),
    ("incident", "Incident on {sys}: {cause}, {n} customers affected for about {m} minutes; "
                 "{person} was on call."),
    ("review", "{person} reviewed the {sys} pull request for {topic} and asked for {ask}."),
    ("meeting", "Planning meeting with {person} and {person2}: agreed to prioritise {topic} for "
                "{sys} next sprint."),
    ("customer_request", "Customer asked for {topic} in {sys}; {person} estimated {n} days of "
                         "work."),
    ("decision", "Decided to {decision} for {sys}, proposed by {person} after comparing "
                 "options."),
    ("note", "{person} mentioned that {sys} {fact}."),
]
CAUSES = ["a stale build cache", "an expired TLS certificate", "a missing database migration",
          "the disk filling up", "a bad feature flag", "rate limiting by the upstream API",
          "a memory leak in the worker", "a schema mismatch", "DNS propagation delay",
          "an out-of-date lock file"]
TOPICS = ["dark mode", "CSV export", "single sign-on", "audit logs", "faster search",
          "webhooks", "multi-currency invoices", "offline sync", "accessibility fixes",
          "usage-based pricing", "retry logic", "better error messages"]
ASKS = ["more tests", "a smaller diff", "a migration plan", "benchmarks", "docs updates",
        "a feature flag"]
DECISIONS = ["move to weekly releases", "drop support for the old API version",
             "shard the table by tenant", "adopt structured logging", "freeze schema changes",
             "switch the queue to Redis streams"]
FACTS = ["pages the on-call engineer at 2am too often", "needs a new owner",
         "still runs on the legacy cluster", "has no runbook yet", "is the slowest service in "
         "the p95 dashboard", "will be retired next quarter"]


@dataclass(frozen=True)
class SyntheticEpisode:
    event: str
    text: str
    observed_at: datetime
    source: str


def episodes(n: int, seed: int = 7,
             start: datetime = datetime(2025, 1, 1, tzinfo=UTC), *,
             unique: bool = False) -> Iterator[SyntheticEpisode]:
    """``n`` episodes, one every ~10 minutes from ``start``. The small vocabularies repeat
    texts (100k episodes hold about 72k distinct ones); ``unique`` ends each text with its
    own ticket reference, so no two repeat."""
    rng = random.Random(seed)
    t = start
    for i in range(n):
        event, template = rng.choice(TEMPLATES)
        p1, p2 = rng.sample(PEOPLE, 2)
        text = template.format(
            sys=rng.choice(SYSTEMS), ver=f"v{rng.randint(1, 40)}.{rng.randint(0, 20)}",
            person=p1, person2=p2, n=rng.randint(2, 90), m=rng.randint(5, 240),
            cause=rng.choice(CAUSES), topic=rng.choice(TOPICS), ask=rng.choice(ASKS),
            decision=rng.choice(DECISIONS), fact=rng.choice(FACTS),
        )
        if unique:
            text += f" Ticket OPS-{i + 1}."
        t += timedelta(minutes=rng.randint(1, 20))
        yield SyntheticEpisode(event, text, t, f"{event.split('_')[0]}:{i}")


QUERIES = [
    "why did the deploy fail", "TLS certificate expired incident", "who reviewed the billing "
    "pull request", "customer request for single sign-on", "decision about weekly releases",
    "memory leak in the worker", "what did Priya say about the CDN", "search-cluster incident",
    "CSV export estimate", "rollback of payments", "runbook missing", "audit logs priority",
    "schema mismatch during deploy", "on-call pages at night", "redis streams queue decision",
]

__all__ = ["QUERIES", "SyntheticEpisode", "episodes"]
