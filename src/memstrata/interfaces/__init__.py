"""How people and agents reach memstrata, over the facade (:class:`memstrata.Memory`).

- :mod:`.tools`: the one list of tool definitions (arguments in :mod:`memstrata.arguments`)
  and the dispatcher; :mod:`.mcp_server` renders them over MCP;
- :mod:`.markdown` (the three files' format and lint), :mod:`.memory_files` (export and
  import), :mod:`.migrate` (a legacy MEMORY.md into the three files);
- :mod:`.transcript`: run-transcript helpers (caps, dedup, summaries);
- :mod:`.demo`: the scripted multi-session demo.
"""
