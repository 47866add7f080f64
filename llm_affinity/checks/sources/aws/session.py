"""One audit's connection to AWS: clients, the shared call pool, the deadline, call counting.

Every reader gets the same :class:`AuditSession`, so all calls of an audit share one bounded
pool of daemon threads (``max_workers``), one overall deadline and one count of API calls and
HTTP requests (taken from botocore's own event hooks, retries included). Kept apart from the
readers so that none of them creates a client, a thread or a timeout of its own.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from concurrent.futures import Future
from typing import Any, Callable, Iterable, TypeVar

import boto3
from botocore.config import Config

from ...model import Unresolved
from . import config
from .pool import DaemonPool, Deadline, P, T

Item = TypeVar("Item")


class AuditSession:
    """Clients per (service, region), the call pool and the deadline of one audit; the account
    and partition, once known, for the ARNs the readers build."""

    def __init__(
        self,
        session: "boto3.session.Session",
        client_config: Config,
        endpoint_url: str | None,
        max_workers: int,
        deadline: Deadline,
        read_user_data: bool = True,
    ):
        self.session = session
        self.client_config = client_config
        self.endpoint_url = endpoint_url
        self.deadline = deadline
        #: False with ``--no-user-data``: user data is dropped as soon as an API returns it (launch
        #: templates, launch configurations), and no call is made only to read it (instances)
        self.read_user_data = read_user_data
        self.pool = DaemonPool(max_workers, "audit-call")
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.http_requests = 0
        self.account: str | None = None
        self.partition = "aws"
        #: every call goes to one endpoint (--endpoint-url or AWS_ENDPOINT_URL): when it is
        #: unreachable, everything is
        self.single_endpoint = bool(endpoint_url or os.environ.get("AWS_ENDPOINT_URL"))
        session.events.register("before-call", self._on_call)
        session.events.register("before-send", self._on_send)

    # counting via botocore's own event hooks; past the deadline nothing more is sent
    def _on_call(self, model: Any = None, **_: Any) -> None:  # botocore's OperationModel
        self.deadline.check()
        if model is not None:
            name = f"{config.IAM_PREFIX.get(model.service_model.service_name, model.service_model.service_name)}:{model.name}"
            with self._lock:
                self.calls[name] += 1

    def _on_send(self, **_: Any) -> None:
        self.deadline.check()  # retries too
        with self._lock:
            self.http_requests += 1

    def call_count(self) -> int:
        """API calls made so far (the workers add to the counter meanwhile)."""
        with self._lock:
            return sum(self.calls.values())

    def client(self, service: str, region: str) -> Any:  # a boto3 client (no type information published)
        key = (service, region)
        with self._lock:
            if key not in self._clients:
                kwargs: dict[str, Any] = {"region_name": region, "config": self.client_config}
                if self.endpoint_url:
                    kwargs["endpoint_url"] = self.endpoint_url
                self._clients[key] = self.session.client(service, **kwargs)
            return self._clients[key]

    # calls --------------------------------------------------------------------------------
    @staticmethod
    def pages(client: Any, operation: str, result_key: str, **kwargs: Any) -> list[Any]:
        out: list[Any] = []
        for page in client.get_paginator(operation).paginate(**kwargs):
            out.extend(page.get(result_key) or [])
        return out

    def submit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        return self.pool.submit(fn, *args, **kwargs)

    def wait(self, fut: Future[T]) -> T:
        """The future's result, or :class:`TimedOut` once the audit's deadline has passed."""
        return self.deadline.wait(fut)

    def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run one call on the pool and wait for it within the deadline."""
        return self.wait(self.submit(fn, *args, **kwargs))

    def fan_out(self, fn: Callable[[Item], Any], items: Iterable[Item]) -> list[tuple[Item, Any, BaseException | None]]:
        """Run ``fn(item)`` for every item on the shared pool: [(item, result, exception)].

        The result is ``Any``: the readers' functions return AWS answers (boto3 publishes no
        types), and it is None when ``fn`` raised (then the exception is set)."""
        listed = list(items)
        futures = [self.pool.submit(fn, item) for item in listed]
        out: list[tuple[Item, Any, BaseException | None]] = []
        for item, fut in zip(listed, futures, strict=True):
            try:
                out.append((item, self.wait(fut), None))
            except Exception as exc:
                out.append((item, None, exc))
        return out

    def close(self) -> None:
        # past the deadline a call may still be stuck on a socket: do not wait for it
        self.pool.shutdown(wait=not self.deadline.expired())


def without_user_data(data: dict[str, Any]) -> dict[str, Any]:
    """A launch template's data or a launch configuration without its ``UserData``: what the
    model then holds is "unknown" (never "none"), so a rule that needed it lists it."""
    if "UserData" not in data:
        return data
    return {**data, "UserData": Unresolved("user data not read (--no-user-data)")}
