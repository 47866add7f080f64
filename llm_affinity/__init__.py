"""llm-affinity: KV-cache affinity for self-hosted vLLM fleets on AWS."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    __version__: str  # read by __getattr__ below, on first use


def __getattr__(name: str) -> Any:
    """``__version__`` is read once, on first use, from the installed metadata (one source:
    pyproject.toml's ``version``; see ``common.install.version``)."""
    if name == "__version__":
        from .common.install import version

        value = version()
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
