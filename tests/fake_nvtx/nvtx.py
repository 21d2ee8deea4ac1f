"""A recording stand-in for NVIDIA's ``nvtx`` package (tests only).

``push_range``/``pop_range`` append ``(thread id, "push"|"pop", name, domain)``
to ``EVENTS``; at exit the events go to ``$FAKE_NVTX_LOG.<pid>`` as JSON lines,
so a test can check, per process and thread, that ranges open and close in order.
"""

import atexit
import json
import os
import threading

EVENTS: list[tuple[int, str, str | None, str | None]] = []


def push_range(message=None, color=None, domain=None, category=None, payload=None):
    EVENTS.append((threading.get_ident(), "push", message, domain))


def pop_range(domain=None):
    EVENTS.append((threading.get_ident(), "pop", None, domain))


@atexit.register
def _dump() -> None:
    path = os.environ.get("FAKE_NVTX_LOG")
    if path:
        with open(f"{path}.{os.getpid()}", "w") as f:
            for e in EVENTS:
                f.write(json.dumps(e) + "\n")
