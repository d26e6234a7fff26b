"""``plait serve``: plait agents over HTTP (AG-UI, OpenAI-compatible, threads/runs).

Needs the ``serve`` extra (``pip install 'plait[serve]'``). See this package's README.md.
"""

from __future__ import annotations

from plait.lazy import lazy_exports

TYPE_CHECKING = False

if TYPE_CHECKING:
    from plait.serve.app import create_app
    from plait.serve.errors import ServeError
    from plait.serve.limits import ServeLimits

__all__ = ["ServeError", "ServeLimits", "create_app"]

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "plait.serve.app": ("create_app",),
            "plait.serve.errors": ("ServeError",),
            "plait.serve.limits": ("ServeLimits",),
        },
    )
