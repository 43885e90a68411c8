"""memstrata: layered, governed memory for LLM agents.

Separate stores for separate kinds of state — scratch, checkpoints, the
operation ledger, the episodic log, durable facts (with an identity tier) and
procedures — each with explicit write and read rules and expiry, a write
policy that keeps secrets and injected instructions out, and a retrieval gate
that filters by scope, status and freshness before it ranks.

    from memstrata import Memory, Scope
    mem = Memory.open()
    scope = Scope(user="alice", project="docs-site")

Only the names in ``__all__`` are public; submodules are the implementation and may move.
"""

from .clock import Clock, ManualClock, SystemClock
from .config import Config
from .errors import (
    AccessDenied,
    ActivationRefused,
    ArgumentError,
    BackendError,
    ConfigError,
    Conflict,
    MemstrataError,
    NotFound,
    PolicyRejected,
    ProviderError,
    ValidationError,
)
from .governance.policy import Candidate, PolicyConfig, WritePolicy
from .layers.checkpoints import Checkpoints
from .layers.episodes import EpisodeInput, Episodes
from .layers.facts import Facts
from .layers.ledger import Ledger
from .layers.procedures import ProcedureEvent, Procedures
from .layers.review import Review
from .layers.scratch import Scratch, ScratchRead
from .memory import Memory, Run, RunCheckpoint, RunLedger
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
from .retrieval.recall import Recall
from .version import __version__

# Names from modules with heavier imports (httpx, numpy, YAML) load on first use, so that
# `import memstrata` and the CLI stay fast.
_LAZY = {
    "AnthropicClient": "providers.llm",
    "ExplicitProposer": "extraction.proposers",
    "ExtractionReport": "extraction.run",
    "LLMJudge": "extraction.judges",
    "LLMProposer": "extraction.proposers",
    "OpenAICompatibleClient": "providers.llm",
    "CaseReport": "layers.procedure_model",
    "Procedure": "layers.procedure_model",
    "ProcedureDiff": "layers.procedure_model",
    "ProcedureState": "layers.procedure_model",
    "Proposer": "extraction.proposers",
    "StepDecision": "layers.procedure_model",
    "SlotJudge": "extraction.judges",
    "ToolDispatcher": "interfaces.tools",
    "anthropic_tools": "interfaces.tool_schemas",
    "openai_tools": "interfaces.tool_schemas",
    "tool_definitions": "interfaces.tool_schemas",
    "Transcript": "interfaces.transcript",
    "get_embedder": "providers.embeddings",
    "register_embedder": "providers.embeddings",
    "register_engine": "store.engines",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memstrata' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AccessDenied",
    "ActivationRefused",
    "AnthropicClient",
    "ArgumentError",
    "BackendError",
    "Candidate",
    "CaseReport",
    "Checkpoint",
    "Checkpoints",
    "Clock",
    "Config",
    "ConfigError",
    "Conflict",
    "Context",
    "Episode",
    "EpisodeInput",
    "Episodes",
    "ExplicitProposer",
    "ExtractionReport",
    "Fact",
    "Facts",
    "ForgetReport",
    "Hit",
    "LLMJudge",
    "LLMProposer",
    "Ledger",
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
    "ProcedureDiff",
    "ProcedureEvent",
    "ProcedureState",
    "Procedures",
    "Proposer",
    "Provenance",
    "ProviderError",
    "Recall",
    "Review",
    "Run",
    "RunCheckpoint",
    "RunLedger",
    "Scope",
    "Scratch",
    "ScratchRead",
    "SlotJudge",
    "StepDecision",
    "SystemClock",
    "ToolDispatcher",
    "Transcript",
    "ValidationError",
    "WritePolicy",
    "WriteResult",
    "__version__",
    "anthropic_tools",
    "get_embedder",
    "openai_tools",
    "register_embedder",
    "register_engine",
    "tool_definitions",
]
