"""Support for the test suite: process-tree builders, the leak check, reference parsers, fixtures.

Test modules import from here, never from each other; plugin.py is loaded by
tests/conftest.py and provides the shared fixtures.
"""
