"""Helpers every test folder shares (tests/conftest.py puts tests/ on sys.path: ``from helpers.x import y``)."""
