"""Pure rules of the write path; nothing here writes.

- :mod:`.policy`: the write policy (provenance, sensitivity, trust, confidence, tier,
  expiry) and the one definition of untrusted actors;
- :mod:`.safety`: screening of every other stored string (secrets redacted, injected
  instructions flagged);
- :mod:`.sensitivity`: the secret and PII scanner; :mod:`.injection`: the injection
  detector.
"""
