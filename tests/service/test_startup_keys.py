"""The startup admin keys of ``memstrata serve``: each start revokes every earlier one of
the store, whatever tenant it was made for, on every backend (on PostgreSQL each tenant's
keys are revoked in a transaction of that tenant, under its row security)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from test_serve_process import _admin_key, serving

from memstrata import ManualClock, Memory
from memstrata.cli.service import STARTUP_LABEL
from memstrata.errors import Unauthenticated
from memstrata.interfaces.service.keys import KeyStore


def test_a_start_revokes_the_startup_key_of_a_start_for_another_tenant(
        tmp_path: Path, store_url: str) -> None:
    """``serve --tenant acme``, then ``serve --no-admin-key`` (the default tenant): the
    first start's key is refused by the second server, and by a third for acme."""
    home = tmp_path / "home"
    with serving(home, "--url", store_url, "--tenant", "acme") as (url, log):
        first = _admin_key(log)
        assert first is not None
        assert httpx.post(f"{url}/v1/whoami",
                          headers={"Authorization": f"Bearer {first}"}).status_code == 200
    with serving(home, "--url", store_url, "--no-admin-key") as (url, log):
        old = httpx.post(f"{url}/v1/whoami", headers={"Authorization": f"Bearer {first}"})
        assert old.status_code == 401, old.text


def test_revoking_a_label_reaches_every_tenant_that_holds_keys(
        mem: Memory, store_url: str, scratch_url: str | None, clock: ManualClock) -> None:
    """Startup keys made by other processes for two tenants (one with no records at all)
    are revoked by one call; keys with another label, or none, stay."""
    from backends import open_store

    other = open_store(store_url, scratch_url, clock)
    others = KeyStore(other.db, other.clock)
    acme_startup, acme_token = others.create("acme", role="admin", label=STARTUP_LABEL)
    own_startup, _ = others.create("default", role="admin", label=STARTUP_LABEL)
    kept, kept_token = others.create("acme", role="agent", label="ops")
    other.close()
    keys = KeyStore(mem.db, mem.clock)
    revoked = keys.revoke_labelled(STARTUP_LABEL)
    assert sorted(k.id for k in revoked) == sorted([acme_startup.id, own_startup.id])
    with pytest.raises(Unauthenticated):
        keys.authenticate(acme_token)
    assert keys.authenticate(kept_token).id == kept.id
    assert [k.id for k in keys.list("acme", include_revoked=False)] == [kept.id]
    assert keys.list("default", include_revoked=False) == []
    assert keys.revoke_labelled(STARTUP_LABEL) == []
