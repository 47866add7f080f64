"""Test support for the sli tests: ALB access-log lines in the documented format, written with
known ground truth (written here independently of the code under test)."""

from __future__ import annotations

import datetime as dt
import gzip
import os

EPOCH0 = dt.datetime(2024, 3, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


def iso(seconds: float) -> str:
    """ISO 8601 with microseconds, as ALB writes it, for EPOCH0 + seconds."""
    return (EPOCH0 + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def epoch(seconds: float) -> float:
    return EPOCH0.timestamp() + seconds


def alb_line(
    created_s: float,
    target: str,
    *,
    query: str = "",
    status: int = 200,
    kind: str = "https",
    extra: str = ' "-" "-" "-" 10.0.3.4',
    user_agent: str = "python-httpx/0.27",
) -> str:
    """One access-log line. ``created_s``: request_creation_time (seconds after EPOCH0); the
    response ``time`` is 0.3 s later; ``query`` is appended to the URL as is; ``extra`` holds
    the fields AWS appended after conn_trace_id (transformed_host ... and one unknown one)."""
    return (
        f"{kind} {iso(created_s + 0.3)} app/llm-front/50dc6c495c0c9188 192.0.2.10:43122 {target} "
        f"0.001 0.295 0.000 {status} {status} 1832 911 "
        f'"POST https://llm.example.com:443/v1/chat/completions{query} HTTP/1.1" "{user_agent}" '
        f"ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 "
        f"arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/vllm/73e2d6bc24d8a067 "
        f'"Root=1-65e1c4c0-1d84f3d73c47ec4e58577259" "llm.example.com" '
        f'"arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012" '
        f'1 {iso(created_s)} "forward" "-" "-" "{target}" "{status}" "-" "-" TID_0a1b2c{extra}\n'
    )


CONNECTION_LOG_LINE = (
    "2024-03-01T12:00:00.000000Z 192.0.2.10 43122 443 TLSv1.2 ECDHE-RSA-AES128-GCM-SHA256 "
    '2.345 "-" - - Success TID_0a1b2c\n'
)


def write(path: str, lines: list[str], *, gz: bool | None = None) -> str:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    data = "".join(lines).encode()
    if gz if gz is not None else path.endswith(".gz"):
        with gzip.open(path, "wb") as fh:
            fh.write(data)
    else:
        with open(path, "wb") as fh:
            fh.write(data)
    return path


def ground_truth_lines() -> list[str]:
    """3 instances, 4 sessions of 4 turns (requests 10 s apart). s1..s3 stay on one instance;
    s4 moves once (turn 3, after a 100 s idle gap). 16 requests; 12 judged pairs, 1 move."""
    a, b, c = "10.0.1.10:8000", "10.0.2.20:8000", "10.0.3.30:8000"
    plan = {"s1": [a, a, a, a], "s2": [b, b, b, b], "s3": [c, c, c, c], "s4": [a, a, b, b]}
    lines = []
    for k, (session, targets) in enumerate(plan.items()):
        t = k * 1.0
        for turn, target in enumerate(targets, 1):
            if session == "s4" and turn == 3:
                t += 100.0
            lines.append(alb_line(t, target, query=f"?llm_session={session}"))
            t += 10.0
    return lines
