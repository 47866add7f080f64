#!/usr/bin/env python3
"""How fast is `llm-affinity audit` at scale, against a naive sequential boto3 script?

Starts moto_server on 127.0.0.1, seeds it with 1,000 target groups, 200 application load
balancers (one listener each) and 50 GPU Auto Scaling groups, and starts a small local proxy
that adds a fixed delay (default 50 ms, a typical AWS API round trip) to every request. Then it
times, side by side, with and without the delay:

* the audit: ``llm_affinity.checks.sources.aws.collect`` (bounded thread pool, default 16);
* a naive script: the same reads with plain boto3, one call after the other (including the
  ECS listing and the registered targets of the groups nothing else explains).

Each run is a fresh subprocess (so peak RSS is the run's own); only the reading is timed, not
interpreter start-up. Prints times, ratios, API-call counts (with the minimum the project asks
for) and peak memory. Not part of the test suite. Needs moto[server] (see pyproject dev extra).

    python bench/audit_scale.py                # full size, ~3-5 minutes on 2 cores
    python bench/audit_scale.py --scale 0.2    # a quick look
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

REGION = "us-east-1"


# --- the delay proxy ---------------------------------------------------------------------------


def start_delay_proxy(upstream: str, delay: float) -> tuple[ThreadingHTTPServer, str]:
    """A keep-alive HTTP/1.1 proxy on 127.0.0.1 that sleeps ``delay`` seconds per request and
    forwards it to ``upstream`` (one upstream connection per proxy thread)."""
    host, port = upstream.split("//", 1)[1].split(":")
    local = threading.local()

    def upstream_conn() -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        local.conn = conn
        return conn

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # no Nagle: headers and body go out as separate writes, and delayed ACKs would
            # otherwise add ~40 ms per request on top of the intended delay
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            time.sleep(delay)
            conn = getattr(local, "conn", None) or upstream_conn()
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
            except (http.client.HTTPException, OSError):
                conn.close()
                conn = upstream_conn()
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
            data = resp.read()
            self.send_response(resp.status)
            for key, value in resp.getheaders():
                if key.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _forward

        def log_message(self, *args) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


# --- the naive sequential reader -----------------------------------------------------------------


def naive(endpoint: str) -> dict:
    """The same reads as the audit, in the obvious way: one boto3 call after the other."""
    import boto3

    session = boto3.session.Session(region_name=REGION)
    calls = [0]
    session.events.register("before-call", lambda **_: calls.__setitem__(0, calls[0] + 1))
    kw = {"endpoint_url": endpoint, "region_name": REGION}
    elb = session.client("elbv2", **kw)
    asg = session.client("autoscaling", **kw)
    ec2 = session.client("ec2", **kw)
    cw = session.client("cloudwatch", **kw)
    gw = session.client("bedrock-agentcore-control", **kw)
    ecs = session.client("ecs", **kw)
    session.client("sts", **kw).get_caller_identity()

    def pages(client, op, key, **params):
        out = []
        for page in client.get_paginator(op).paginate(**params):
            out += page.get(key) or []
        return out

    lbs = pages(elb, "describe_load_balancers", "LoadBalancers")
    tgs = pages(elb, "describe_target_groups", "TargetGroups")
    lb_attrs = {
        lb["LoadBalancerArn"]: elb.describe_load_balancer_attributes(LoadBalancerArn=lb["LoadBalancerArn"])[
            "Attributes"
        ]
        for lb in lbs
    }
    tg_attrs = {
        tg["TargetGroupArn"]: elb.describe_target_group_attributes(TargetGroupArn=tg["TargetGroupArn"])["Attributes"]
        for tg in tgs
    }
    arns = [x["LoadBalancerArn"] for x in lbs] + [x["TargetGroupArn"] for x in tgs]
    tags = [elb.describe_tags(ResourceArns=arns[i : i + 20]) for i in range(0, len(arns), 20)]
    listeners = [
        ls for lb in lbs for ls in pages(elb, "describe_listeners", "Listeners", LoadBalancerArn=lb["LoadBalancerArn"])
    ]
    rules = [
        pages(elb, "describe_rules", "Rules", ListenerArn=ls["ListenerArn"])
        for ls in listeners
        if ls.get("Protocol") in ("HTTP", "HTTPS")
    ]
    groups = pages(asg, "describe_auto_scaling_groups", "AutoScalingGroups")
    hooks = [asg.describe_lifecycle_hooks(AutoScalingGroupName=g["AutoScalingGroupName"]) for g in groups]
    templates = pages(ec2, "describe_launch_templates", "LaunchTemplates")
    used = {g["LaunchTemplate"]["LaunchTemplateId"] for g in groups if g.get("LaunchTemplate")}
    versions = [
        pages(
            ec2,
            "describe_launch_template_versions",
            "LaunchTemplateVersions",
            LaunchTemplateId=t,
            Versions=["$Default"],
        )
        for t in sorted(used)
    ]
    alarms = pages(cw, "describe_alarms", "MetricAlarms")
    gateways = [gw.get_gateway(gatewayIdentifier=g["gatewayId"]) for g in pages(gw, "list_gateways", "items")]
    # ECS services behind target groups: their task definitions and capacity providers
    services = []
    for cluster in pages(ecs, "list_clusters", "clusterArns"):
        arns = pages(ecs, "list_services", "serviceArns", cluster=cluster)
        for i in range(0, len(arns), 10):
            services += ecs.describe_services(cluster=cluster, services=arns[i : i + 10], include=["TAGS"])["services"]
    behind = [s for s in services if any(lb.get("targetGroupArn") for lb in s.get("loadBalancers") or [])]
    tasks = [ecs.describe_task_definition(taskDefinition=t) for t in sorted({s["taskDefinition"] for s in behind})]
    providers = sorted(
        {
            c["capacityProvider"]
            for s in behind
            for c in s.get("capacityProviderStrategy") or []
            if c["capacityProvider"] not in ("FARGATE", "FARGATE_SPOT")
        }
    )
    if providers:
        ecs.describe_capacity_providers(capacityProviders=providers)
    # registered targets of the groups nothing else explains (the same choice as the audit)
    by_arn = {
        d["ResourceArn"]: {t["Key"]: t["Value"] for t in d.get("Tags") or []}
        for page in tags
        for d in page["TagDescriptions"]
    }
    fed = {t for g in groups for t in g.get("TargetGroupARNs") or []}
    fed |= {lb["targetGroupArn"] for s in services for lb in s.get("loadBalancers") or [] if lb.get("targetGroupArn")}
    instance_ids = set()
    for tg in tgs:
        arn = tg["TargetGroupArn"]
        role = by_arn.get(arn, {}).get("llm-affinity:role", "").strip().lower()
        sticky = any(a["Key"] == "stickiness.enabled" and a["Value"] == "true" for a in tg_attrs[arn])
        if arn in fed:
            continue
        if role == "inference" and not sticky:
            elb.describe_target_health(TargetGroupArn=arn)
        elif role != "inference" and tg.get("TargetType") == "instance" and tg.get("LoadBalancerArns"):
            health = elb.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
            instance_ids |= {d["Target"]["Id"] for d in health}
    ids = sorted(instance_ids)
    for i in range(0, len(ids), 200):
        pages(ec2, "describe_instances", "Reservations", Filters=[{"Name": "instance-id", "Values": ids[i : i + 200]}])
    size = (
        len(lbs),
        len(tgs),
        len(lb_attrs),
        len(tg_attrs),
        len(tags),
        len(rules),
        len(hooks),
        len(templates),
        len(versions),
        len(alarms),
        len(gateways),
        len(services),
        len(tasks),
    )
    return {"api_calls": calls[0], "sizes": size}


def run_child(kind: str, endpoint: str, workers: int) -> dict:
    """In a fresh process: time one reading of the account."""
    os.environ.pop("AWS_ENDPOINT_URL", None)
    if kind == "naive":
        import boto3  # noqa: F401  (import cost not timed)

        start = time.perf_counter()
        out = naive(endpoint)
    else:
        from llm_affinity.checks.sources.aws import collect

        start = time.perf_counter()
        result = collect(regions=[REGION], endpoint_url=endpoint, max_workers=workers)
        if not result.reached_any or result.errors:
            raise SystemExit(f"audit failed: {result.errors}")
        model = result.models[0]
        out = {
            "api_calls": result.coverage["api_calls"],
            "http_requests": result.coverage["http_requests"],
            "operations": result.coverage["operations"],
            "sizes": (len(model.load_balancers), len(model.target_groups), len(model.fleets)),
        }
    out["seconds"] = time.perf_counter() - start
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def measure(kind: str, endpoint: str, workers: int, env: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--endpoint", endpoint, "--workers", str(workers)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{kind} run failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- main ------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of 1000 TGs / 200 LBs / 50 ASGs")
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--workers", default="16", help="comma-separated audit worker counts (default 16)")
    parser.add_argument("--child", choices=("audit", "naive"), help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    args = parser.parse_args()

    import audit_fixtures as F

    env = F.fake_credentials()
    os.environ.update(env)
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        os.environ.pop(key, None)
    if args.child:
        print(json.dumps(run_child(args.child, args.endpoint, int(args.workers))))
        return 0

    n_tg, n_lb, n_asg = (max(1, round(x * args.scale)) for x in (1000, 200, 50))
    workers = [int(w) for w in args.workers.split(",")]
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    direct = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(f"{direct}/moto-api/", timeout=1).read()
                break
            except OSError:
                time.sleep(0.2)
        t0 = time.perf_counter()
        done = [0]
        total = n_tg + n_lb + n_asg

        def tick() -> None:
            done[0] += 1
            if done[0] % 100 == 0 or done[0] == total:
                print(f"\rseeding {done[0]}/{total}", end="", file=sys.stderr, flush=True)

        F.seed_scale(direct, REGION, target_groups=n_tg, load_balancers=n_lb, asgs=n_asg, progress=tick)
        print(
            f"\nseeded {n_tg} target groups, {n_lb} ALBs (1 listener each), {n_asg} ASGs "
            f"in {time.perf_counter() - t0:.1f} s",
            file=sys.stderr,
        )
        proxy, delayed = start_delay_proxy(direct, args.delay_ms / 1000)

        rows = []
        for label, endpoint in (("localhost", direct), (f"+{args.delay_ms:g} ms/request", delayed)):
            print(f"measuring {label} ...", file=sys.stderr)
            seq = measure("naive", endpoint, 1, env)
            for w in workers:
                aud = measure("audit", endpoint, w, env)
                rows.append((label, w, seq, aud))
        proxy.shutdown()
    finally:
        server.terminate()
        server.wait(timeout=10)

    print()
    print(
        f"account: {n_tg} target groups, {n_lb} ALBs + listeners, {n_asg} Auto Scaling groups "
        f"({os.cpu_count()} CPUs; moto_server shares them)"
    )
    print(
        f"{'network':<22}{'workers':>8}{'sequential s':>14}{'audit s':>10}{'speed-up':>10}"
        f"{'calls seq':>11}{'calls audit':>13}{'audit RSS MB':>14}"
    )
    for label, w, seq, aud in rows:
        print(
            f"{label:<22}{w:>8}{seq['seconds']:>14.2f}{aud['seconds']:>10.2f}"
            f"{seq['seconds'] / aud['seconds']:>9.1f}x{seq['api_calls']:>11}{aud['api_calls']:>13}"
            f"{aud['peak_rss_mb']:>14.0f}"
        )
    ops = rows[-1][3]["operations"]
    pages = sum(
        ops.get(f"{svc}:{op}", 0)
        for svc, op in (
            ("elasticloadbalancing", "DescribeLoadBalancers"),
            ("elasticloadbalancing", "DescribeTargetGroups"),
            ("autoscaling", "DescribeAutoScalingGroups"),
            ("ec2", "DescribeLaunchTemplates"),
            ("cloudwatch", "DescribeAlarms"),
            ("bedrock-agentcore", "ListGateways"),
            ("ecs", "ListClusters"),
        )
    )
    # registered targets: groups a load balancer uses (the first n_lb), no ASG feeds (the first
    # n_asg), not tagged inference (seed_scale tags sticky groups i % 3 == 0): none registered
    health = sum(1 for i in range(n_asg, min(n_lb, n_tg)) if not (i % 2 and i % 3 == 0))
    minimum = (
        pages
        + n_tg
        + n_lb
        + math.ceil((n_tg + n_lb) / 20)
        + n_lb
        + n_lb
        + n_asg
        + ops.get("ec2:DescribeLaunchTemplateVersions", 0)
        + health
        + 1
    )
    print(
        f"minimum calls for this account: {minimum} = {pages} list pages (as the server pages them) + "
        f"{n_tg} TG + {n_lb} LB attribute calls + {math.ceil((n_tg + n_lb) / 20)} tag batches of 20 + "
        f"{n_lb} listener + {n_lb} rule lists + {n_asg} hook lists + one version call per launch template "
        f"+ {health} target-health calls (groups behind a load balancer that nothing else explains) "
        f"+ 1 identity call"
    )
    print("audit calls by action: " + ", ".join(f"{k.split(':')[1]}={v}" for k, v in ops.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
