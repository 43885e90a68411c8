"""Providers behind small typed protocols: embedders (:mod:`.embeddings`, registered by
name, built-ins through the same hook as third parties) and LLM clients (:mod:`.llm`), both
over the one HTTP stack of :mod:`.http` when they speak to a server.
"""
