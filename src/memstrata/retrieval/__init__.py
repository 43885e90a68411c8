"""The read path: the retrieval gate and what it is made of.

- :mod:`.recall`: the gate (filter, rank, floor, budget, flags) and :class:`Recall`;
- :mod:`.decisions`: the decisions it serves and their rules;
- :mod:`.ranking`: rankers (:func:`~.ranking.hybrid` by default) over the layers' filters;
- :mod:`.context`: what a session starts with, with its manifest;
- :mod:`.temporal`: periods named in a query.

Everything here takes the layers it reads, never the facade.
"""
