"""The point-to-point layer: every message of a hand-written strategy passes through here."""
