"""CLI: ``memstrata serve`` (the REST API, MCP endpoint and inspector) and ``memstrata keys``.

``serve`` opens the configured store (the embedded SQLite file by default, PostgreSQL
with --url) and runs the ASGI app under uvicorn. Every start revokes every earlier startup
admin key of the store, whatever the flags and whatever tenant it was made for; unless
--no-admin-key, it then prints a new one-time admin key of the tenant, so at most one
startup key works at a time: the latest start's.
``keys create|list|revoke`` manage the tenant's keys; a new key's token is printed once
and stored only as a hash.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from typing import Any

import click

from ._common import cli_config, emit_json, json_option, open_memory, store_options, table

STARTUP_LABEL = "serve startup key"


def _need_serve_extra() -> None:
    missing = [n for n in ("starlette", "uvicorn", "mcp") if importlib.util.find_spec(n) is None]
    if missing:
        click.echo(f"memstrata serve needs the serve extra ({', '.join(missing)} is not "
                   "installed).\n  install it with: pip install 'memstrata[serve]'", err=True)
        raise SystemExit(2)


def _json_logs(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("memstrata.service")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False


@click.command()
@store_options
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to listen on (0.0.0.0 for every interface; keys are required "
                   "either way).")
@click.option("--port", type=int, default=8080, show_default=True)
@click.option("--max-body", type=click.IntRange(1024, 64 * 1024 * 1024), default=256 * 1024,
              show_default=True, help="Largest request body, in bytes (413 beyond).")
@click.option("--rate", type=click.IntRange(1, 1_000_000), default=600, show_default=True,
              help="Requests per minute per key, unless the key sets its own.")
@click.option("--no-mcp", is_flag=True, help="Do not mount the MCP endpoint at /mcp.")
@click.option("--no-inspector", is_flag=True, help="Do not serve the inspector pages at /.")
@click.option("--no-admin-key", is_flag=True,
              help="Do not create and print a startup admin key (the previous start's "
                   "is revoked all the same).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info", show_default=True, help="Request log level (JSON lines).")
def serve(host: str, port: int, max_body: int, rate: int, no_mcp: bool, no_inspector: bool,
          no_admin_key: bool, log_level: str) -> None:
    """Serve the store over HTTP: REST API (/v1, /openapi.json), MCP (/mcp), inspector (/).

    \b
    One person: `memstrata serve` opens the default store and prints the URL and a
    one-time admin key. A team: `memstrata serve --url postgresql://... --host 0.0.0.0`,
    with keys made by `memstrata keys create --role agent --user alice`.
    """
    _need_serve_extra()
    import uvicorn

    from ..interfaces.service.app import ServiceConfig, build_app
    from ..interfaces.service.keys import KeyStore

    cfg = cli_config()
    mem = open_memory(create=True)
    tenant = cfg.scope().tenant
    app = build_app(mem, ServiceConfig(max_body=max_body, rate_per_minute=rate,
                                       mcp=not no_mcp, inspector=not no_inspector))
    url = f"http://{host}:{port}"
    click.echo(f"memstrata serve on {url} ({mem.db.engine}, tenant {tenant})", err=True)
    click.echo(f"  REST {url}/v1/...  OpenAPI {url}/openapi.json"
               + ("" if no_mcp else f"  MCP {url}/mcp")
               + ("" if no_inspector else f"  inspector {url}/"), err=True)
    keys = KeyStore(mem.db, mem.clock)
    keys.revoke_labelled(STARTUP_LABEL)  # "valid until the next start", whatever its tenant
    if not no_admin_key:
        _, token = keys.create(tenant, role="admin", label=STARTUP_LABEL)
        click.echo(f"  admin key (shown once, valid until the next start): {token}", err=True)
    _json_logs(log_level)
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on")


@click.group()
def keys() -> None:
    """API keys of `memstrata serve`: create, list, revoke (per tenant)."""


@keys.command("create")
@store_options
@click.option("--role", type=click.Choice(["agent", "reviewer", "admin"]), default="agent",
              show_default=True, help="agent: propose, log, read; reviewer: also review, "
                                      "retire, undo; admin: also keys, forget, procedures.")
@click.option("--users", default=None, help="Comma-separated users the key may act for "
                                            "(default: --user, else any).")
@click.option("--projects", default=None, help="Comma-separated projects (default: "
                                               "--project, else any).")
@click.option("--principal", default=None,
              help="Reader name restricted records are checked against.")
@click.option("--actor", type=click.Choice(["agent", "user", "tool", "system", "import"]),
              default=None, help="Who the key's writes are attributed to.")
@click.option("--label", default=None, help="A note (who or what uses the key).")
@click.option("--rate", type=click.IntRange(1, 1_000_000), default=None,
              help="Requests per minute (default: the server's).")
@json_option
def keys_create(role: str, users: str | None, projects: str | None, principal: str | None,
                actor: str | None, label: str | None, rate: int | None,
                as_json: bool) -> None:
    """Create a key; its token is printed once."""
    from ..interfaces.service.keys import KeyStore

    scope = cli_config().scope()
    mem = open_memory(create=True, embedder=None)

    def names(given: str | None, default: str | None) -> list[str] | None:
        if given:
            return [n.strip() for n in given.split(",") if n.strip()]
        return [default] if default else None

    key, token = KeyStore(mem.db, mem.clock).create(
        scope.tenant, role=role, users=names(users, scope.user),
        projects=names(projects, scope.project),
        agents=[scope.agent] if scope.agent else None, principal=principal, actor=actor,
        label=label, rate_per_minute=rate)
    if as_json:
        emit_json({"key": key.summary(), "token": token})
        return
    click.echo(f"created {key.role} key {key.id} for tenant {key.tenant}"
               f" (users: {', '.join(key.users or ['any'])}; "
               f"projects: {', '.join(key.projects or ['any'])})")
    click.echo(f"token (shown once, stored only as a hash):\n{token}")


@keys.command("list")
@store_options
@click.option("--active", is_flag=True, help="Only keys that are not revoked.")
@json_option
def keys_list(active: bool, as_json: bool) -> None:
    """The tenant's keys (never their secrets)."""
    from ..interfaces.service.keys import KeyStore

    mem = open_memory(embedder=None)
    found = KeyStore(mem.db, mem.clock).list(cli_config().scope().tenant,
                                             include_revoked=not active)
    if as_json:
        emit_json([k.summary() for k in found])
        return

    def shown(values: Any) -> str:
        return ", ".join(values) if values else "any"

    table(f"API keys of tenant {cli_config().scope().tenant}",
          ["id", "role", "users", "projects", "principal", "label", "created", "revoked"],
          [(k.id, k.role, shown(k.users), shown(k.projects), k.principal, k.label,
            k.created_at.date().isoformat(),
            k.revoked_at.date().isoformat() if k.revoked_at else "") for k in found])


@keys.command("revoke")
@store_options
@click.argument("key_id")
@json_option
def keys_revoke(key_id: str, as_json: bool) -> None:
    """Revoke a key now; the next request with it is refused."""
    from ..interfaces.service.keys import KeyStore

    mem = open_memory(embedder=None)
    key = KeyStore(mem.db, mem.clock).revoke(cli_config().scope().tenant, key_id)
    if as_json:
        emit_json(key.summary())
    else:
        click.echo(f"revoked key {key.id} ({key.role}, tenant {key.tenant})")


def register(group: click.Group) -> None:
    for cmd in (serve, keys):
        group.add_command(cmd)
