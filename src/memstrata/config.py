"""Configuration: flags > environment > config file > defaults, with the source of each value.

Contract:
- The config file is ``$MEMSTRATA_HOME/config.toml`` (home defaults to
  ``~/.memstrata``), or the file ``$MEMSTRATA_CONFIG`` names. It is optional;
  read with :mod:`tomllib`. Unknown keys and wrong types are a
  :class:`~memstrata.errors.ConfigError` naming the key, so a typo never
  silently falls back to a default::

      url = "sqlite:////srv/memstrata/memory.db"   # or postgresql://...
      embedder = "minilm"                          # minilm | hash | none | openai:MODEL@URL
      scratch_url = "redis://127.0.0.1:6379/0"
      tenant = "acme"
      user = "alice"
      project = "docs-site"

      [policy]
      min_confidence = 0.7
      secrets = "reject"        # or "redact"
      pii_to_review = true
      dedup_cosine = 0.9        # near facts of other slots are named, never merged

- Environment variables: ``MEMSTRATA_URL``, ``MEMSTRATA_EMBEDDER``,
  ``MEMSTRATA_SCRATCH_URL``, ``MEMSTRATA_TENANT``, ``MEMSTRATA_USER``,
  ``MEMSTRATA_PROJECT``, ``MEMSTRATA_AGENT``, and
  ``MEMSTRATA_MIN_CONFIDENCE`` / ``MEMSTRATA_SECRETS`` for the policy.
- :func:`load_config` resolves every value once and records where it came
  from (``flag``, ``env:NAME``, ``file:PATH``, ``default``);
  ``memstrata config show`` prints that table. Nothing is opened or created
  while loading; ``Memory.from_config(config)`` opens the store it names.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .governance.policy import PolicyConfig
from .models import Scope, make_scope
from .store.engines import default_home

#: Keys of the top level of config.toml, with their environment variable.
ENV_VARS: dict[str, str] = {
    "url": "MEMSTRATA_URL",
    "embedder": "MEMSTRATA_EMBEDDER",
    "scratch_url": "MEMSTRATA_SCRATCH_URL",
    "tenant": "MEMSTRATA_TENANT",
    "user": "MEMSTRATA_USER",
    "project": "MEMSTRATA_PROJECT",
    "agent": "MEMSTRATA_AGENT",
}
POLICY_ENV_VARS: dict[str, str] = {
    "min_confidence": "MEMSTRATA_MIN_CONFIDENCE",
    "secrets": "MEMSTRATA_SECRETS",
}
POLICY_TYPES: dict[str, type] = {
    "min_confidence": float, "secrets": str, "pii_to_review": bool, "dedup_cosine": float,
}
DEFAULTS: dict[str, Any] = {
    "url": None, "embedder": "minilm", "scratch_url": None,
    "tenant": "default", "user": None, "project": None, "agent": None,
}


def _default(key: str) -> Any:
    if key == "embedder":
        from .providers.embeddings import missing_minilm_packages

        # the library's own default: the offline MiniLM model when its extra is installed
        return "none" if missing_minilm_packages() else "minilm"
    return DEFAULTS[key]


def config_file(env: Mapping[str, str] | None = None) -> Path:
    """Where the config file is read from (it need not exist)."""
    env = os.environ if env is None else env
    explicit = env.get("MEMSTRATA_CONFIG")
    return Path(explicit).expanduser() if explicit else default_home(env) / "config.toml"


@dataclass(frozen=True)
class Config:
    """Effective configuration; ``sources`` says where each value came from."""

    home: Path
    file: Path
    values: dict[str, Any]
    policy_values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The store URL, with the embedded default filled in."""
        explicit = self.values.get("url")
        return str(explicit) if explicit else f"sqlite:///{self.home / 'memory.db'}"

    @property
    def embedder(self) -> str:
        return str(self.values.get("embedder") or "default")

    @property
    def scratch_url(self) -> str | None:
        value = self.values.get("scratch_url")
        return str(value) if value else None

    def scope(self) -> Scope:
        """The scope named by tenant/user/project/agent."""
        return make_scope({k: self.values.get(k) for k in ("tenant", "user", "project", "agent")})

    def policy(self) -> PolicyConfig:
        """The write-policy thresholds (library defaults for anything unset)."""
        return PolicyConfig(**self.policy_values)

    def rows(self) -> list[tuple[str, str, str]]:
        """(key, value, source) for every setting, for people."""
        out = [("home", str(self.home), self.sources.get("home", "default")),
               ("config file", str(self.file) + ("" if self.file.exists() else " (absent)"),
                self.sources.get("file", "default"))]
        for key in ENV_VARS:
            value = self.url if key == "url" else self.values.get(key)
            out.append((key, "" if value is None else str(value),
                        self.sources.get(key, "default")))
        for key in POLICY_TYPES:
            value = self.policy_values.get(key, getattr(PolicyConfig(), key))
            out.append((f"policy.{key}", str(value), self.sources.get(f"policy.{key}",
                                                                       "default")))
        return out

    def as_dict(self) -> dict[str, Any]:
        """Effective values and sources, JSON-able."""
        return {key: {"value": value, "source": source} for key, value, source in self.rows()}


def _read_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}",
                          hint="fix the file or move it away") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}",
                          hint=f"make {path} readable, or point $MEMSTRATA_CONFIG at "
                               "another file") from exc
    unknown = sorted(set(data) - set(ENV_VARS) - {"policy"})
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}",
                          hint="known keys: " + ", ".join([*ENV_VARS, "[policy]"]))
    for key in ENV_VARS:
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"{path}: {key} must be a string, not {data[key]!r}",
                              hint=f'quote it in {path}: {key} = "..."')
    policy = data.get("policy", {})
    if not isinstance(policy, dict):
        raise ConfigError(f"{path}: policy must be a table ([policy])",
                          hint=f"in {path}, put the policy keys under a [policy] line: "
                               + ", ".join(POLICY_TYPES))
    bad = sorted(set(policy) - set(POLICY_TYPES))
    if bad:
        raise ConfigError(f"{path}: unknown policy key(s) {', '.join(bad)}",
                          hint="known: " + ", ".join(POLICY_TYPES))
    return data


#: What each policy setting accepts, in words (for the error that refuses another value).
POLICY_ALLOWED: dict[str, str] = {
    "min_confidence": "a number from 0 to 1",
    "secrets": "'reject' or 'redact'",
    "pii_to_review": "true or false",
    "dedup_cosine": "a number from 0 to 1",
}
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def _policy_value(key: str, value: Any, *, path: Path, var: str | None = None) -> Any:
    """``value`` of ``policy.key`` as the policy takes it, read from the environment
    variable ``var`` (when given) or the config file ``path``; any other value is a
    ConfigError that names the setting, where it came from and what it accepts."""
    kind = POLICY_TYPES[key]
    if kind is float:
        number = value
        if isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                number = None
        if isinstance(number, int | float) and not isinstance(number, bool) \
                and 0 <= number <= 1:
            return float(number)
    elif kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
    elif value in ("reject", "redact"):  # secrets
        return value
    allowed = POLICY_ALLOWED[key]
    if var is not None:
        raise ConfigError(f"policy.{key} from the environment variable {var} must be "
                          f"{allowed}, not {value!r}",
                          hint=f"set {var} to {allowed}, or unset it (then the config file's "
                               "value applies, else the default)")
    raise ConfigError(f"policy.{key} in {path} must be {allowed}, not {value!r}",
                      hint=f"set {key} under [policy] in {path} to {allowed}, or remove "
                           "the line to use the default")


def _check_embedder(spec: Any, source: str, path: Path) -> None:
    """Refuse an embedder setting that names no embedder, saying where it came from (a
    command that never embeds would otherwise take it silently)."""
    from .providers.embeddings import embedder_names, names_an_embedder

    if not isinstance(spec, str) or names_an_embedder(spec):
        return
    where = {"flag": "--embedder"}.get(source) or (
        f"the environment variable {source.removeprefix('env:')}" if source.startswith("env:")
        else f"{path}")
    known = ", ".join(["minilm", "hash", "hash:DIMS", "openai:MODEL@BASE_URL", "none",
                       *(n for n in embedder_names() if n not in ("minilm", "hash", "openai"))])
    raise ConfigError(f"the embedder {spec!r} from {where} names no embedder",
                      hint=f"set it to one of: {known}")


def load_config(flags: Mapping[str, Any] | None = None, *,
                env: Mapping[str, str] | None = None) -> Config:
    """Resolve the configuration: ``flags`` (None = not given) > env > file > defaults."""
    env = os.environ if env is None else env
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    home = default_home(env)
    path = config_file(env)
    sources = {"home": "env:MEMSTRATA_HOME" if env.get("MEMSTRATA_HOME") else "default",
               "file": "env:MEMSTRATA_CONFIG" if env.get("MEMSTRATA_CONFIG") else "default"}
    data = _read_file(path)
    values: dict[str, Any] = {}
    for key, var in ENV_VARS.items():
        if key in flags:
            values[key], sources[key] = flags[key], "flag"
        elif env.get(var):
            values[key], sources[key] = env[var], f"env:{var}"
        elif key in data:
            values[key], sources[key] = data[key], f"file:{path}"
        else:
            values[key], sources[key] = _default(key), "default"
    _check_embedder(values.get("embedder"), sources.get("embedder", "default"), path)
    policy: dict[str, Any] = {}
    file_policy = data.get("policy", {})
    for key in POLICY_TYPES:
        var = POLICY_ENV_VARS.get(key, "")
        if var and env.get(var):
            policy[key] = _policy_value(key, env[var], path=path, var=var)
            sources[f"policy.{key}"] = f"env:{var}"
        elif key in file_policy:
            policy[key] = _policy_value(key, file_policy[key], path=path)
            sources[f"policy.{key}"] = f"file:{path}"
    return Config(home=home, file=path, values=values, policy_values=policy, sources=sources)


__all__ = ["DEFAULTS", "ENV_VARS", "POLICY_ALLOWED", "POLICY_ENV_VARS", "Config", "config_file",
           "default_home", "load_config"]
