"""The ``plait`` command line. Each command group lives in its own module."""

from __future__ import annotations

from plait.cli.app import app, main

__all__ = ["app", "main"]
