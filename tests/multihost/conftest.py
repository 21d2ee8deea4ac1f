"""Every test here runs real hosts (network namespaces): marked ``multihost``."""

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "/multihost/" in str(item.fspath):
            item.add_marker(pytest.mark.multihost)
