"""End-of-session extraction (DESIGN §5): what a session leaves in durable memory.

- :mod:`.session`: the transcript as turns (the one message flattening), quotes, support;
- :mod:`.proposers`: who suggests (the explicit proposer needs no model; the LLM one does);
- :mod:`.judges`: whether a candidate replaces a fact in another slot;
- :mod:`.run`: the run itself (check every proposal, judge, write through the policy).
"""
