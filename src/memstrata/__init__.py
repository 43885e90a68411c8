"""memstrata: layered, governed memory for LLM agents.

Separate stores for separate kinds of state — scratch, checkpoints, the
operation ledger, the episodic log, durable facts (with an identity tier) and
procedures — each with explicit write and read rules and expiry, a write
policy that keeps secrets and injected instructions out, and a retrieval gate
that filters by scope, status and freshness before it ranks.

    from memstrata import Memory, Scope
    mem = Memory.open()
    scope = Scope(user="alice", project="docs-site")
"""

from .clock import Clock, ManualClock, SystemClock
from .errors import (
    AccessDenied,
    ActivationRefused,
    BackendError,
    ConfigError,
    Conflict,
    MemstrataError,
    NotFound,
    PolicyRejected,
    ProviderError,
    ValidationError,
)
from .memory import Memory, Run
from .models import (
    Checkpoint,
    Context,
    Episode,
    Fact,
    ForgetReport,
    Hit,
    ManifestEntry,
    Operation,
    Provenance,
    Scope,
    WriteResult,
)
from .policy import PolicyConfig, WritePolicy
from .recall import Recall

__version__ = "0.1.0"

__all__ = [
    "AccessDenied",
    "ActivationRefused",
    "BackendError",
    "Checkpoint",
    "Clock",
    "ConfigError",
    "Conflict",
    "Context",
    "Episode",
    "Fact",
    "ForgetReport",
    "Hit",
    "ManifestEntry",
    "ManualClock",
    "Memory",
    "MemstrataError",
    "NotFound",
    "Operation",
    "PolicyConfig",
    "PolicyRejected",
    "Provenance",
    "ProviderError",
    "Recall",
    "Run",
    "Scope",
    "SystemClock",
    "ValidationError",
    "WritePolicy",
    "WriteResult",
    "__version__",
]
