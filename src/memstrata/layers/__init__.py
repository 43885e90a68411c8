"""The layers of memory, each the only writer of its tables and the owner of its read
filter and embed text.

- :mod:`.scratch` (``scratch``): run-scoped working memory with TTL and receipts;
- :mod:`.runs` (``runs``): when runs began and ended;
- :mod:`.checkpoints` (``checkpoints``): versioned task handoffs;
- :mod:`.ledger` (``operations``): idempotency keys for side effects;
- :mod:`.episodes` (``episodes``): the append-only episodic log;
- :mod:`.facts` (``facts``): durable facts with supersession; :mod:`.review`, the review
  queue over them; :mod:`.feedback` (``feedback``): signals on recalled items;
- :mod:`.procedure_model` (pure) and :mod:`.procedures` (``procedures``);
- :mod:`.forget` and :mod:`.retention`: compose the layers' own deletions;
- :mod:`.indexing`: lexical entries and vectors beside the rows; :mod:`.selector`: what a
  forget selects.

Layers take the parts they use (the database, the clock, the policy, the index), never
the facade.
"""
