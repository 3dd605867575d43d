"""Root conftest: load the netslo plugin and fixtures for every test directory."""

pytest_plugins = ["plugins.netslo_plugin", "fixtures.cluster"]
