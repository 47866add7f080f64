"""The local lab: N stub engines behind an emulated ALB, optionally each behind the real nginx.

    with Lab(tmp_path, instances=3, stickiness="lb_cookie") as lab:
        run probe against lab.base_url
        lab.alb_log_path           # ALB access log of that traffic (documented format)
        lab.truth_records()        # what the engines served: Record list (ground truth)
        lab.front_records()        # what the front saw (what an ALB-log reader must rebuild)
        lab.targets                # {"127.0.0.1:PORT": instance id}, how log targets map to instances
        parse_log_line(line)       # the lab's own reader of one access-log line (a test oracle)

Stickiness ``None`` is the plain round-robin front. Everything binds 127.0.0.1 only; tests stay
fast with the default tiny sleeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llm_affinity.evidence.report import Record, build_report

from .engine import MODEL, PrefixCache, StubEngine, chat_tokens
from .front import FIELD_NAMES, AlbFront, Target, parse_log_line, parse_time
from .nginx import NginxProxy, lab_nginx_config


def instance_id(n: int) -> str:
    return f"i-{n:017x}"


class Lab:
    def __init__(
        self,
        workdir: str | Path,
        *,
        instances: int = 3,
        stickiness: str | None = "lb_cookie",
        nginx: bool = False,
        duration_s: float = 86400.0,
        session_query: str | None = None,
        extra_fields: bool = False,
        **engine_kwargs: Any,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.engines: list[StubEngine] = []
        self.proxies: list[NginxProxy] = []
        self.front: AlbFront | None = None
        try:
            targets = []
            for n in range(1, instances + 1):
                iid = instance_id(n)
                kwargs = dict(engine_kwargs)
                if nginx:  # on a fleet the proxy, not vLLM, says who served
                    kwargs.setdefault("served_by", False)
                engine = StubEngine(iid, session_query=session_query, **kwargs)
                self.engines.append(engine)
                port = engine.port
                if nginx:
                    proxy = NginxProxy(iid, engine.port, self.workdir / f"nginx-{n}")
                    self.proxies.append(proxy)
                    port = proxy.port
                targets.append(Target(iid, "127.0.0.1", port))
            self.front = AlbFront(
                targets,
                self.workdir / "alb-access.log",
                stickiness=stickiness,
                duration_s=duration_s,
                session_query=session_query,
                extra_fields=extra_fields,
            )
        except BaseException:
            self.close()
            raise

    @property
    def base_url(self) -> str:
        assert self.front is not None
        return f"{self.front.url}/v1"

    @property
    def alb_log_path(self) -> Path:
        """The access log, once every request in flight has been logged."""
        assert self.front is not None
        self.front.settle()
        return self.front.log_path

    @property
    def targets(self) -> dict[str, str]:
        assert self.front is not None
        return {t.key: t.instance_id for t in self.front.targets}

    def truth_records(self) -> list[Record]:
        """Every chat request as the engines served it (engine arrival time, session from the
        session header or query key, turn = number of user messages)."""
        return [
            Record(
                ts=s.ts,
                session=s.session,
                turn=s.turn,
                instance=s.instance,
                prompt_tokens=s.prompt_tokens,
                cached_tokens=s.cached_tokens,
                ttft_ms=None,
                status=200,
            )
            for e in self.engines
            for s in list(e.served)
        ]

    def truth_report(self, **kwargs: Any) -> dict[str, Any]:
        return build_report(self.truth_records(), source="lab ground truth", **kwargs)

    def front_records(self) -> list[Record]:
        """Every request as the front saw it — what an ALB access-log reader should rebuild:
        ts = request creation time, session from the query key (or header), instance = the
        target's instance id, turn = the request's rank within its session, status = ELB status."""
        assert self.front is not None
        self.front.settle()
        out, seen = [], {}
        for r in sorted(self.front.served, key=lambda r: r.request_creation_time):
            turn = None
            if r.session is not None:
                turn = seen[r.session] = seen.get(r.session, 0) + 1
            out.append(
                Record(
                    ts=r.request_creation_time, session=r.session, turn=turn, instance=r.instance, status=r.elb_status
                )
            )
        return out

    def stop_instance(self, iid: str) -> None:
        """Deregister one target at the front (its sessions get re-pinned)."""
        assert self.front is not None
        self.front.deregister(iid)

    def close(self) -> None:
        if self.front is not None:
            self.front.close()
        for proxy in self.proxies:
            proxy.close()
        for engine in self.engines:
            engine.close()

    def __enter__(self) -> "Lab":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "Lab",
    "StubEngine",
    "PrefixCache",
    "AlbFront",
    "Target",
    "NginxProxy",
    "lab_nginx_config",
    "chat_tokens",
    "instance_id",
    "MODEL",
    "FIELD_NAMES",
    "parse_log_line",
    "parse_time",
]
