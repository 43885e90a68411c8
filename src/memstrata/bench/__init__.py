"""Retrieval benchmarks for memstrata (LoCoMo evidence recall); no LLM needed."""
