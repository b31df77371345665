"""Subcommands of the `frost` CLI, one module each (see frost/cli.py)."""
