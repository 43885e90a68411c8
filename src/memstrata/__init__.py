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

# Names from modules with heavier imports (httpx, numpy, YAML) load on first use, so that
# `import memstrata` and the CLI stay fast.
_LAZY = {
    "AnthropicClient": "llm",
    "ExplicitProposer": "extraction",
    "ExtractionReport": "extraction",
    "LLMJudge": "judge",
    "LLMProposer": "extraction",
    "OpenAICompatibleClient": "llm",
    "Procedure": "procedures",
    "ProcedureState": "procedures",
    "SlotJudge": "judge",
    "ToolDispatcher": "tools",
    "Transcript": "transcript",
    "get_embedder": "embeddings",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memstrata' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value

__all__ = [
    "AccessDenied",
    "ActivationRefused",
    "AnthropicClient",
    "BackendError",
    "Checkpoint",
    "Clock",
    "ConfigError",
    "Conflict",
    "Context",
    "Episode",
    "ExplicitProposer",
    "ExtractionReport",
    "Fact",
    "ForgetReport",
    "Hit",
    "LLMJudge",
    "LLMProposer",
    "ManifestEntry",
    "ManualClock",
    "Memory",
    "MemstrataError",
    "NotFound",
    "OpenAICompatibleClient",
    "Operation",
    "PolicyConfig",
    "PolicyRejected",
    "Procedure",
    "ProcedureState",
    "Provenance",
    "ProviderError",
    "Recall",
    "Run",
    "Scope",
    "SlotJudge",
    "SystemClock",
    "ToolDispatcher",
    "Transcript",
    "ValidationError",
    "WritePolicy",
    "WriteResult",
    "__version__",
    "get_embedder",
]
