"""What the audit knows about each region/service, and what one reader hands back.

A :class:`Coverage` is the audit's honesty ledger: ``ok`` is earned by a call that succeeded,
never assumed, and every failure keeps the worst status and one grouped message, so the report
can say exactly what was not checked. A :class:`Part` is the resources one reader built; the
run merges the parts into one model. Both live apart from the readers so that every reader and
the run share one definition of "read", "partial" and "not needed".
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TypeAlias

import botocore.exceptions as bexc

from ...model import (
    Alarm,
    EngineHost,
    Fleet,
    Listener,
    LoadBalancer,
    McpGateway,
    ModelError,
    Service,
    TargetGroup,
)
from . import config
from .errors import NOTHING_MISSING, READ_STATUSES, STATUS_RANK, classify

#: How failures are grouped: (status, operation or exception type, error code, what was left unread).
ProblemGroup: TypeAlias = tuple[str, str, str, str | None]


class Coverage:
    """What is known about one region/service. ``ok`` is earned, never assumed: only a call to
    the service that succeeded (:meth:`read`) makes it ``ok`` or ``partial``; a service with
    nothing to read is ``not-needed``; a fatal failure gives its own status (worst one kept)."""

    def __init__(self, region: str, service: str):
        self.region = region
        self.service = service
        self.was_read = False
        self.fatal: str | None = None
        self.fatal_exc: BaseException | None = None
        self.not_needed = False
        self.skip_reason: str | None = None
        self.note: str | None = None  # replaces the message of an "unavailable" entry
        self.problems: dict[ProblemGroup, tuple[int, str]] = {}  # group → (count, first message)
        self.lock = threading.Lock()

    @property
    def key(self) -> str:
        return f"{self.region}/{self.service}"

    def read(self) -> None:
        """A call to the service succeeded."""
        self.was_read = True

    def fail(self, exc: BaseException, fatal: bool, what: str | None = None) -> None:
        status, message = classify(exc, config.MAX_ATTEMPTS)
        if isinstance(exc, bexc.ClientError):
            group = (status, getattr(exc, "operation_name", ""), str(exc.response.get("Error", {}).get("Code")), what)
        else:
            group = (status, type(exc).__name__, "", what)
        with self.lock:
            if fatal and (self.fatal is None or STATUS_RANK[status] > STATUS_RANK[self.fatal]):
                self.fatal, self.fatal_exc = status, exc
            if what:
                message = f"{message} ({what})"
            count, first = self.problems.get(group, (0, message))
            self.problems[group] = (count + 1, first)

    def mark_unavailable(self, note: str) -> None:
        """Nothing can exist here (the service has no endpoint in this region)."""
        with self.lock:
            self.fatal, self.note, self.problems = "unavailable", note, {}

    @property
    def status(self) -> str:
        if self.fatal is not None:
            return self.fatal
        if self.was_read:  # read, but what it depends on was not: partly checked
            return "partial" if self.problems or self.skip_reason else "ok"
        if self.not_needed:
            return "not-needed"
        if self.skip_reason:
            return "skipped"
        return "error"  # never reached by the readers: a service nobody accounted for

    @property
    def unreadable(self) -> bool:
        return self.status not in READ_STATUSES | NOTHING_MISSING

    def errors(self) -> list[ModelError]:
        status = self.status
        if status in ("ok", "not-needed"):
            return []
        if status == "unavailable" and self.note:
            return [ModelError(self.key, f"not available: {self.note}")]
        if status == "skipped":
            return [ModelError(self.key, f"not checked: {self.skip_reason}")]
        if not self.problems and not self.skip_reason:
            return [ModelError(self.key, "could not check: no call to it was made (internal error)")]
        prefix = {"unavailable": "not available", "partial": "partly checked"}.get(status, "could not check")
        out = [ModelError(self.key, f"partly checked: {self.skip_reason}")] if self.skip_reason else []
        for count, message in self.problems.values():
            suffix = f" [{count} resources]" if count > 1 else ""
            out.append(ModelError(self.key, f"{prefix}: {message}{suffix}"))
        return out


@dataclass
class Part:
    """What one region/service reader produced."""

    load_balancers: list[LoadBalancer] = field(default_factory=list)
    listeners: list[Listener] = field(default_factory=list)
    target_groups: list[TargetGroup] = field(default_factory=list)
    fleets: list[Fleet] = field(default_factory=list)
    engines: list[EngineHost] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    gateways: list[McpGateway] = field(default_factory=list)
    alarms: list[Alarm] = field(default_factory=list)
