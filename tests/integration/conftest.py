"""Integration tests need root (network namespaces); skip with the reason otherwise."""

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="needs root to create network namespaces")
        for item in items:
            if "integration" in str(item.fspath):
                item.add_marker(skip)
