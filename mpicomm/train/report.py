"""Results of a training run: the JSON document (strict: no NaN); the table: ``analysis.report``."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from mpicomm.analysis.report import COLUMNS, format_table
from mpicomm.core.units import jsonable

__all__ = ["COLUMNS", "format_table", "write_json", "document"]


def write_json(path: str, document: dict) -> None:
    """Write ``document`` as JSON to ``path`` atomically (temp file + os.replace)."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(jsonable(document), f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def document(command: str, cfg: Any, records: list[dict], topology: dict,
             **extra: Any) -> dict:
    """Return the JSON document of a run: config, versions, topology, results."""
    from mpicomm.core.environment import environment

    return {"command": command, "config": dataclasses.asdict(cfg), "environment": environment(),
            "topology": topology, "results": records, **extra}
