"""Results of a training run: the JSON document (strict: no NaN); the table: ``analysis.report``."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from mpicomm.analysis.report import COLUMNS, format_table
from mpicomm.core.outputs import replace_atomically
from mpicomm.core.units import jsonable

__all__ = ["COLUMNS", "format_table", "write_json", "document"]


def write_json(path: str, document: dict) -> None:
    """Write ``document`` as JSON to ``path`` atomically (``core.outputs.replace_atomically``:
    a temporary file renamed over it, removed if anything fails)."""
    text = json.dumps(jsonable(document), indent=2, allow_nan=False) + "\n"  # fails before
    replace_atomically(path, lambda f: f.write(text))


def document(command: str, cfg: Any, records: list[dict], topology: dict,
             **extra: Any) -> dict:
    """Return the JSON document of a run: config, versions, topology, results."""
    from mpicomm.core.environment import environment

    return {"command": command, "config": dataclasses.asdict(cfg), "environment": environment(),
            "topology": topology, "results": records, **extra}
