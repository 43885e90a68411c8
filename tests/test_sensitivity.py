"""The sensitivity scanner against its corpus, plus its contract (no values in reports)."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from memstrata.errors import ConfigError
from memstrata.governance.sensitivity import (
    BUILTIN_DETECTORS,
    Finding,
    ScanReport,
    SensitivityScanner,
    iban_valid,
    is_placeholder,
    luhn_valid,
    redact,
    scan,
    shannon_entropy,
)

CORPUS = Path(__file__).parent / "data" / "secrets_corpus.yaml"


@cache
def corpus() -> dict[str, list[dict[str, Any]]]:
    data: dict[str, list[dict[str, Any]]] = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    return data


def _covering(report: ScanReport, text: str, value: str, kind: str) -> list[Finding]:
    start = text.index(value)
    end = start + len(value)
    return [f for f in report.findings if f.kind == kind and f.start <= start and f.end >= end]


def test_corpus_is_large_and_varied() -> None:
    data = corpus()
    secret_types = Counter(s["detector"] for s in data["secrets"])
    assert len(data["secrets"]) >= 80
    assert len(secret_types) >= 18
    assert len(data["harmless"]) >= 80
    assert {p["detector"] for p in data["pii"]} == {"email", "phone", "payment_card", "iban"}
    assert len(data["not_pii"]) >= 20
    ids = [x["id"] for section in data.values() for x in section]
    assert len(ids) == len(set(ids))
    for item in data["secrets"] + data["pii"]:
        assert item["value"] in item["text"], item["id"]


def test_every_builtin_detector_is_exercised_by_the_corpus() -> None:
    expected = {s["detector"] for s in corpus()["secrets"]} | {p["detector"]
                                                              for p in corpus()["pii"]}
    assert expected == set(BUILTIN_DETECTORS)


def test_secret_recall_and_detector_names() -> None:
    missed: list[str] = []
    misnamed: list[str] = []
    secrets = corpus()["secrets"]
    for item in secrets:
        text, value = item["text"], item["value"]
        report = scan(text)
        covering = _covering(report, text, value, "secret")
        if not covering or value in redact(text, report):
            missed.append(item["id"])
        elif covering[0].detector != item["detector"]:
            misnamed.append(f"{item['id']} -> {covering[0].detector}")
    recall = 1 - len(missed) / len(secrets)
    named = 1 - (len(missed) + len(misnamed)) / len(secrets)
    print(f"secret recall {recall:.3f} over {len(secrets)}; expected detector {named:.3f}")
    assert recall >= 0.98, missed
    assert named >= 0.95, misnamed


def test_harmless_look_alikes_raise_no_secret() -> None:
    harmless = corpus()["harmless"]
    flagged = [(h["id"], scan(h["text"]).detectors()) for h in harmless
               if scan(h["text"]).has_secret]
    rate = len(flagged) / len(harmless)
    print(f"secret false positives {rate:.3f} over {len(harmless)}")
    assert rate <= 0.02, flagged


def test_pii_recall_and_look_alikes() -> None:
    pii, not_pii = corpus()["pii"], corpus()["not_pii"]
    missed = [p["id"] for p in pii
              if not [f for f in _covering(scan(p["text"]), p["text"], p["value"], "pii")
                      if f.detector == p["detector"]]]
    flagged = [(n["id"], scan(n["text"]).detectors()) for n in not_pii if scan(n["text"]).findings]
    print(f"pii recall {1 - len(missed) / len(pii):.3f}; "
          f"pii false positives {len(flagged) / len(not_pii):.3f}")
    assert len(missed) / len(pii) <= 0.02, missed
    assert len(flagged) / len(not_pii) <= 0.02, flagged
    assert not any(scan(p["text"]).has_secret for p in pii)


def test_reports_never_show_the_value() -> None:
    assert [f.name for f in dataclasses.fields(Finding)] == ["detector", "kind", "start", "end"]
    for item in corpus()["secrets"] + corpus()["pii"]:
        report = scan(item["text"])
        shown = " ".join([repr(report), str(report), *map(repr, report.findings),
                          *report.detectors(), repr(report.secrets), repr(report.pii)])
        assert item["value"] not in shown, item["id"]


def test_redaction_marks_the_detector_and_keeps_the_rest() -> None:
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    text = f"deploy with GITHUB_TOKEN={token} then tag v1.2"
    report = scan(text)
    assert report.has_secret and report.detectors() == ["github_token"]
    assert redact(text) == "deploy with GITHUB_TOKEN=[REDACTED:github_token] then tag v1.2"
    assert redact(text, report) == redact(text)


def test_pii_is_kept_unless_asked_and_marks_the_report() -> None:
    text = "Reach Maria at maria.g@example.org or +44 20 7946 0958."
    report = scan(text)
    assert report.has_pii and not report.has_secret
    assert report.detectors() == ["email", "phone"]
    assert redact(text, report) == text
    assert redact(text, report, redact_pii=True) == (
        "Reach Maria at [REDACTED:email] or [REDACTED:phone].")


def test_overlaps_resolve_to_the_specific_detector_and_the_union_span() -> None:
    jwt = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI0MiIsIm5hbWUiOiJKYW5lIn0."
           "c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmU")
    report = scan(f"Authorization: Bearer {jwt}")
    assert [f.detector for f in report.findings] == ["jwt"]
    # the password of a URL is not also reported as an e-mail address
    url = "postgres://app:Zq8-vX2mK9pL@db.example.com:5432/app"
    assert scan(url).detectors() == ["url_credentials"]
    for item in corpus()["secrets"]:
        findings = scan(item["text"]).findings
        assert all(a.end <= b.start for a, b in itertools.pairwise(findings))


def test_plain_memory_claims_are_clean() -> None:
    claims = [
        "The user prefers tabs over spaces.",
        "Deploys happen on Tuesdays after the 10:00 standup; version 2.14.0 shipped 2024-05-02.",
        "Our API key is stored in Vault under secret/data/payments; rotate it every 90 days.",
        "Use the staging database for load tests; never the production one.",
        "Commit 3f9c2ab fixed the login bug reported in ticket #4821.",
        "",
    ]
    for claim in claims:
        assert scan(claim).findings == (), claim


def test_checks() -> None:
    assert luhn_valid("4242424242424242") and not luhn_valid("4242424242424241")
    assert not luhn_valid("4242-4242")
    assert iban_valid("DE89 3704 0044 0532 0130 00") and iban_valid("GB82WEST12345698765432")
    assert not iban_valid("DE00 3704 0044 0532 0130 00") and not iban_valid("DE89 3704")
    assert shannon_entropy("") == 0 and shannon_entropy("aaaa") == 0
    assert shannon_entropy("abcd") == pytest.approx(2.0)
    for placeholder in ("sk-...", "<your-token>", "${DB_PASSWORD}", "xxxxxxxxxxxx", "password"):
        assert is_placeholder(placeholder), placeholder
    assert not is_placeholder("Zq8-vX2mK9pL")


def test_scanner_configuration() -> None:
    text = "GITHUB_TOKEN=ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5 and api_key: 8f3k2j9x7c4v1b6n"
    assert "github_token" not in SensitivityScanner(disabled=["github_token"]).scan(
        text).detectors()
    # the generic detector needs entropy: a high threshold silences it, the default does not
    assert "generic_secret" in scan(text).detectors()
    strict = SensitivityScanner(entropy_threshold=4.5)
    assert "generic_secret" not in strict.scan(text).detectors()
    custom = SensitivityScanner(extra_patterns={"acme_key": r"\bacme_(?P<secret>[0-9a-f]{24})\b"})
    report = custom.scan("key acme_0123456789abcdef01234567 here")
    assert report.detectors() == ["acme_key"]
    assert custom.redact("key acme_0123456789abcdef01234567 here") == (
        "key acme_[REDACTED:acme_key] here")
    assert SensitivityScanner(detect_pii=False).scan("mail bob@corp-mail.org").findings == ()
    assert "email" not in SensitivityScanner(detect_pii=False).detector_names
    with pytest.raises(ConfigError):
        SensitivityScanner(disabled=["no_such_detector"])
    with pytest.raises(ConfigError):
        SensitivityScanner(extra_patterns={"broken": "(unclosed"})
    with pytest.raises(ConfigError):
        SensitivityScanner(entropy_threshold=9)


def test_prefilter_changes_speed_not_findings() -> None:
    full = SensitivityScanner(prefilter=False)
    data = corpus()
    texts = [x["text"] for section in data.values() for x in section]
    for text in texts:
        assert full.scan(text) == scan(text), text
