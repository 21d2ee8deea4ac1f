"""The sync engine: buckets over the flat gradient (fusion), overlap with backward, accumulation."""
