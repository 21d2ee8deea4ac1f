"""Gradient codecs (compression on the wire), wrapped around any reducer."""
