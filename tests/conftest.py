"""Test-suite wiring: make ``tests/support`` (shared fakes such as the wire server) importable."""

from __future__ import annotations

import sys
from pathlib import Path

_SUPPORT = str(Path(__file__).parent / "support")
if _SUPPORT not in sys.path:
    sys.path.insert(0, _SUPPORT)
