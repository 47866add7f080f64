"""Boot script of a vLLM instance, as plain text (no aws_cdk import, so it is unit-testable).

What an instance does at boot, and why:
1. read its instance id through IMDSv2 (the launch template requires tokens);
2. start the official `vllm/vllm-openai` container with `--enable-prefix-caching` written out
   explicitly (on by default in V1, but an explicit flag survives a version that changes the
   default and is what the linter's FLEET003 looks for);
3. configure the CloudWatch agent to scrape vLLM's Prometheus `/metrics` into per-instance
   metrics (prefix-cache hits/queries, running/waiting requests, KV usage) and to accept EMF;
4. run `ttft_exporter.py` for TTFT p50/p95, because the agent drops Prometheus histograms;
5. optionally run nginx in front of vLLM to set the application cookie from a session header
   (ALB app-cookie stickiness needs the target to set the cookie; vLLM sets none).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from importlib import resources
from typing import Sequence

#: CloudWatch namespace of the per-instance engine metrics.
METRIC_NAMESPACE = "LlmAffinity/vLLM"
#: vLLM metrics the agent keeps (current V1 names, see aws-facts.md E2).
SCRAPED_METRICS = (
    "vllm:prefix_cache_hits_total",
    "vllm:prefix_cache_queries_total",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
)
NGINX_IMAGE_DEFAULT = "nginx:1.27-alpine"
_CFG_DIR = "/etc/llm-affinity"
_AGENT_DIR = "/opt/aws/amazon-cloudwatch-agent"


@dataclass(frozen=True)
class CookieProxySpec:
    """nginx in front of vLLM that sets `cookie_name` from `session_header` (app-cookie mode)."""

    cookie_name: str
    session_header: str = "X-Session-Id"
    listen_port: int = 8080
    image: str = NGINX_IMAGE_DEFAULT


@dataclass(frozen=True)
class BootSpec:
    model_id: str
    vllm_image: str
    fleet_name: str
    log_group_name: str
    port: int = 8000
    vllm_args: Sequence[str] = field(default_factory=tuple)
    hf_token_secret_arn: str | None = None  # may be a CDK token string; only ever interpolated


def vllm_args(spec: BootSpec) -> list[str]:
    """Arguments after the image name (they go to `vllm serve`)."""
    return ["--model", spec.model_id, "--port", str(spec.port), "--enable-prefix-caching",
            *spec.vllm_args]


def vllm_docker_command(spec: BootSpec) -> str:
    env = ' -e HUGGING_FACE_HUB_TOKEN="$HF_TOKEN"' if spec.hf_token_secret_arn else ""
    return (
        "docker run -d --name vllm --restart unless-stopped --runtime nvidia --gpus all --ipc=host"
        f" -p {spec.port}:{spec.port} -v /opt/hf-cache:/root/.cache/huggingface{env}"
        f" {shlex.quote(spec.vllm_image)} " + " ".join(shlex.quote(a) for a in vllm_args(spec))
    )


def prometheus_config(spec: BootSpec) -> str:
    """Prometheus scrape config read by the CloudWatch agent (YAML is a JSON superset)."""
    cfg = {
        "global": {"scrape_interval": "30s", "scrape_timeout": "10s"},
        "scrape_configs": [{
            "job_name": "vllm",
            "metrics_path": "/metrics",
            "static_configs": [{
                "targets": [f"localhost:{spec.port}"],
                "labels": {"Fleet": spec.fleet_name, "InstanceId": "__INSTANCE_ID__"},
            }],
        }],
    }
    return json.dumps(cfg, indent=2)


def cloudwatch_agent_config(spec: BootSpec) -> dict:
    """Agent config: Prometheus `/metrics` -> EMF -> metrics by Fleet and by Fleet+InstanceId."""
    selectors = ["^" + m.replace(":", "[:]") + "$" for m in SCRAPED_METRICS]
    return {
        "agent": {"metrics_collection_interval": 60, "run_as_user": "cwagent"},
        "logs": {
            "force_flush_interval": 5,
            "metrics_collected": {
                "emf": {},
                "prometheus": {
                    "log_group_name": spec.log_group_name,
                    "prometheus_config_path": f"{_AGENT_DIR}/etc/prometheus.yaml",
                    "emf_processor": {
                        "metric_declaration_dedup": True,
                        "metric_namespace": METRIC_NAMESPACE,
                        "metric_declaration": [{
                            "source_labels": ["job"],
                            "label_matcher": "^vllm$",
                            "dimensions": [["Fleet"], ["Fleet", "InstanceId"]],
                            "metric_selectors": selectors,
                        }],
                    },
                },
            },
        },
    }


def nginx_config(proxy: CookieProxySpec, upstream_port: int) -> str:
    """nginx.conf: set the app cookie from the session header (or re-set the one the client
    sent), stream responses unbuffered.

    The cookie is written on every response that carries a session id, not only the first:
    when the sticky instance disappears the ALB picks a new target, and that target must set
    the cookie again for the ALB to re-pin the session. Only a conservative character set is
    copied from the header into the cookie.
    """
    header_var = "$http_" + proxy.session_header.lower().replace("-", "_")
    cookie_var = "$cookie_" + proxy.cookie_name
    name = proxy.cookie_name
    return f"""worker_processes auto;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  map "{header_var}|{cookie_var}" $llm_affinity_sid {{
    "~^(?<hdr>[A-Za-z0-9._~-]{{1,128}})\\|" $hdr;
    "~^\\|(?<ck>[A-Za-z0-9._~-]{{1,128}})$" $ck;
    default "";
  }}
  map $llm_affinity_sid $llm_affinity_set_cookie {{
    "" "";
    default "{name}=$llm_affinity_sid; Path=/; HttpOnly; SameSite=Lax";
  }}
  server {{
    listen {proxy.listen_port};
    client_max_body_size 64m;
    location / {{
      proxy_pass http://127.0.0.1:{upstream_port};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_cache off;
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
      add_header Set-Cookie $llm_affinity_set_cookie always;
    }}
  }}
}}
"""


def exporter_source() -> str:
    return resources.files("llm_affinity.constructs").joinpath("assets/ttft_exporter.py").read_text()


def _heredoc(path: str, body: str, marker: str) -> list[str]:
    assert marker not in body
    return [f"cat > {path} <<'{marker}'", *body.rstrip("\n").split("\n"), marker]


def boot_commands(spec: BootSpec) -> list[str]:
    """Shell lines of the boot script (vLLM, CloudWatch agent, TTFT exporter)."""
    agent_json = json.dumps(cloudwatch_agent_config(spec), indent=2)
    lines = [
        "set -euo pipefail",
        "exec > >(tee /var/log/llm-affinity-boot.log) 2>&1",
        'IMDS_TOKEN=$(curl -sf -X PUT http://169.254.169.254/latest/api/token -H "X-aws-ec2-metadata-token-ttl-seconds: 300")',
        'INSTANCE_ID=$(curl -sf -H "X-aws-ec2-metadata-token: $IMDS_TOKEN" http://169.254.169.254/latest/meta-data/instance-id)',
        f"mkdir -p {_CFG_DIR} /opt/hf-cache {_AGENT_DIR}/etc",
    ]
    if spec.hf_token_secret_arn:
        lines.append(
            "HF_TOKEN=$(aws secretsmanager get-secret-value --secret-id "
            f"'{spec.hf_token_secret_arn}' --query SecretString --output text)"
        )
    lines.append("# vLLM (OpenAI-compatible server) with prefix caching on")
    lines.append(vllm_docker_command(spec))
    lines.append("# CloudWatch agent: Prometheus /metrics -> per-instance metrics")
    lines.append("if ! command -v /opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl >/dev/null; then")
    lines.append("  ARCH=$(dpkg --print-architecture)")
    lines.append('  curl -sfo /tmp/cwagent.deb "https://amazoncloudwatch-agent.s3.amazonaws.com/ubuntu/${ARCH}/latest/amazon-cloudwatch-agent.deb"')
    lines.append("  dpkg -i -E /tmp/cwagent.deb")
    lines.append("fi")
    lines += _heredoc(f"{_AGENT_DIR}/etc/prometheus.yaml", prometheus_config(spec), "LLM_AFFINITY_PROM")
    lines += _heredoc(f"{_AGENT_DIR}/etc/llm-affinity-agent.json", agent_json, "LLM_AFFINITY_AGENT")
    lines.append(f'sed -i "s/__INSTANCE_ID__/$INSTANCE_ID/" {_AGENT_DIR}/etc/prometheus.yaml')
    lines.append(
        f"{_AGENT_DIR}/bin/amazon-cloudwatch-agent-ctl -a fetch-config -m ec2 -s "
        f"-c file:{_AGENT_DIR}/etc/llm-affinity-agent.json"
    )
    lines.append("# TTFT p50/p95 (the agent drops Prometheus histograms)")
    lines += _heredoc(f"{_CFG_DIR}/ttft_exporter.py", exporter_source(), "LLM_AFFINITY_EXPORTER")
    lines += _heredoc("/etc/systemd/system/llm-affinity-ttft.service", (
        "[Unit]\nDescription=llm-affinity TTFT exporter\nAfter=network-online.target\n"
        "[Service]\n"
        f"ExecStart=/usr/bin/python3 {_CFG_DIR}/ttft_exporter.py --namespace {METRIC_NAMESPACE}"
        f" --fleet {spec.fleet_name} --instance-id __INSTANCE_ID__ --log-group {spec.log_group_name}"
        f" --url http://127.0.0.1:{spec.port}/metrics\n"
        "Restart=always\nDynamicUser=yes\n[Install]\nWantedBy=multi-user.target"
    ), "LLM_AFFINITY_UNIT")
    lines.append('sed -i "s/__INSTANCE_ID__/$INSTANCE_ID/" /etc/systemd/system/llm-affinity-ttft.service')
    lines.append("systemctl daemon-reload && systemctl enable --now llm-affinity-ttft.service")
    return lines


def proxy_commands(proxy: CookieProxySpec, upstream_port: int) -> list[str]:
    """Shell lines that start the cookie-setting nginx (appended in app-cookie mode)."""
    lines = ["# nginx: sets the application cookie from the session header (ALB app_cookie mode)"]
    lines += _heredoc(f"{_CFG_DIR}/nginx.conf", nginx_config(proxy, upstream_port), "LLM_AFFINITY_NGINX")
    lines.append(
        "docker run -d --name llm-affinity-proxy --restart unless-stopped --network host"
        f" -v {_CFG_DIR}/nginx.conf:/etc/nginx/nginx.conf:ro {shlex.quote(proxy.image)}"
    )
    return lines
