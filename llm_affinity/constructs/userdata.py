"""Boot script of a vLLM instance, as plain text (no aws_cdk import, so it is unit-testable and
the probe lab can run `nginx_config` in a real nginx).

What an instance does at boot, and why:
1. read its instance id through IMDSv2 (the launch template requires tokens and allows one
   network hop, so only the host, never a container, can read metadata or role credentials);
2. read the secrets it needs (Hugging Face token, vLLM API key) from Secrets Manager on the
   host with the instance role, and hand them to the container through its environment: no
   secret is ever in user data, the template or a command line;
3. start the official `vllm/vllm-openai` container with `--enable-prefix-caching` written out
   explicitly (on by default in V1, but an explicit flag survives a version that changes the
   default and is what the linter's FLEET003 looks for) and `--enable-prompt-tokens-details`
   (usage then carries `prompt_tokens_details.cached_tokens`, the per-request cache evidence);
4. start nginx in front of vLLM in every stickiness mode: it adds `X-Served-By: <instance id>`
   to every response, writes one JSON access line per request (shipped by the CloudWatch
   agent), serves only the inference API and `/health` (metrics are scraped on the host, never
   through the load balancer), and in app-cookie mode sets the application cookie from
   the session header (ALB app-cookie stickiness needs the target to set a cookie; vLLM sets
   none);
5. configure the CloudWatch agent (on the host) to scrape vLLM's Prometheus `/metrics` into
   per-instance metrics and to ship the proxy's access log;
6. run `ttft_exporter.py` for TTFT p50/p95, because the agent drops Prometheus histograms.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
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
#: LMCache and vLLM's KV-connector counters the agent keeps when the fleet shares KV
#: (LMCache's prometheus_client counters are exposed with `_total`; docs/lmcache.md).
LMCACHE_SCRAPED_METRICS = (
    "lmcache:num_hit_tokens_total",
    "lmcache:num_requested_tokens_total",
    "lmcache:num_stored_tokens_total",
    "vllm:external_prefix_cache_hits_total",
    "vllm:external_prefix_cache_queries_total",
)
NGINX_IMAGE_DEFAULT = "nginx:1.27-alpine"
#: The only session ids the proxy accepts (a full match; anything else is refused).
SESSION_ID_PATTERN = r"^[A-Za-z0-9._~-]{1,128}$"
#: Placeholder replaced on the instance by its IMDSv2 instance id (validated first).
INSTANCE_ID_PLACEHOLDER = "__INSTANCE_ID__"
#: Paths the proxy forwards: the inference API and the health check the load balancer needs;
#: everything else gets 404 from the proxy itself. vLLM's `--api-key` guards only `/v1`, so its
#: other routes would be unguarded: `/metrics` (per-model load, cache usage, request counts) and
#: `/version` are read on the host (the CloudWatch agent and the TTFT exporter scrape
#: 127.0.0.1:<vLLM port>), never through the load balancer; `/invocations`, `/tokenize` not at all.
PROXIED_EXACT = ("/health",)
PROXIED_PREFIX = "/v1/"
_CFG_DIR = "/etc/llm-affinity"
_LOG_DIR = "/var/log/llm-affinity"
_AGENT_DIR = "/opt/aws/amazon-cloudwatch-agent"
_SID_CLASS = "[A-Za-z0-9._~-]{1,128}"


@dataclass(frozen=True)
class ProxySpec:
    """nginx in front of vLLM (every mode). With `cookie_name` it also sets the application
    cookie from `session_header` (ALB app-cookie mode).

    cookie_name: app cookie to set, or None (duration-cookie and NLB modes).
    session_header / session_query: where the session id is read for the access log (and, with
      a cookie, for the cookie); the cookie itself is the third source.
    secure_cookie: add `Secure` (the listener in front is HTTPS).
    same_site: `Lax` (default; see docs/constructs.md), `Strict` or `None` (needs secure_cookie).
    instance_id: the value of `X-Served-By` and of the log's `instance` (a placeholder replaced
      at boot on EC2).
    access_log: path of the JSON access log.
    """

    cookie_name: str | None = None
    session_header: str = "X-Session-Id"
    listen_port: int = 8080
    image: str = NGINX_IMAGE_DEFAULT
    session_query: str | None = "llm_session"
    secure_cookie: bool = False
    same_site: str = "Lax"
    instance_id: str = INSTANCE_ID_PLACEHOLDER
    access_log: str = f"{_LOG_DIR}/access.log"

    def __post_init__(self) -> None:
        checks = (
            ("cookie_name", self.cookie_name, r"^[A-Za-z0-9_]{1,64}$", True),
            ("session_header", self.session_header, r"^[A-Za-z0-9-]{1,64}$", False),
            ("session_query", self.session_query, r"^[A-Za-z0-9_]{1,64}$", True),
            ("same_site", self.same_site, r"^(Lax|Strict|None)$", False),
            ("instance_id", self.instance_id, r"^[A-Za-z0-9_.-]{1,64}$", False),
            ("access_log", self.access_log, r"^/[A-Za-z0-9_./-]{1,255}$", False),
            ("image", self.image, r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$", False),
        )
        for name, value, pattern, optional in checks:
            if value is None and optional:
                continue
            if not isinstance(value, str) or not re.fullmatch(pattern.strip("^$"), value):
                raise ValueError(f"ProxySpec: {name}={value!r} does not match {pattern}")
        if not isinstance(self.listen_port, int) or not 1 <= self.listen_port <= 65535:
            raise ValueError(f"ProxySpec: listen_port={self.listen_port!r} is out of range 1-65535")
        if self.same_site == "None" and not self.secure_cookie:
            raise ValueError("ProxySpec: same_site='None' needs secure_cookie=True (browsers drop it otherwise)")


#: The name used before the proxy ran in every mode; `CookieProxySpec("llm_session")` still works.
CookieProxySpec = ProxySpec


@dataclass(frozen=True)
class KvSpec:
    """LMCache in the vLLM container (the fleet shares KV through a remote store).

    kv_transfer_config: the JSON of `--kv-transfer-config` (connector and role).
    env: LMCache's settings as `(name, value)` pairs, all non-secret (LMCACHE_CHUNK_SIZE, …).
    auth_secret_arn: the Secrets Manager secret holding the store's AUTH token (may be a CDK
      token string; only ever interpolated): read on the host at boot, never in user data.
    host / port: the store's primary endpoint (template references).
    tmpfs: a fresh in-memory directory per container start (LMCache's multiprocess Prometheus
      files, which must not outlive the processes that wrote them).
    """

    kv_transfer_config: str
    env: tuple[tuple[str, str], ...]
    auth_secret_arn: str
    host: str
    port: str
    tmpfs: str | None = None


@dataclass(frozen=True)
class BootSpec:
    model_id: str
    vllm_image: str
    fleet_name: str
    log_group_name: str
    port: int = 8000
    vllm_args: Sequence[str] = field(default_factory=tuple)
    hf_token_secret_arn: str | None = None  # may be a CDK token string; only ever interpolated
    api_key_secret_arn: str | None = None  # idem
    access_log_group_name: str | None = None
    proxy: ProxySpec | None = None
    kv: KvSpec | None = None
    #: the image's ENTRYPOINT is `vllm serve` (the model is the first, positional argument)
    model_positional: bool = False


def vllm_args(spec: BootSpec) -> list[str]:
    """Arguments after the image name (they go to `vllm serve`)."""
    model = [spec.model_id] if spec.model_positional else ["--model", spec.model_id]
    kv = ["--kv-transfer-config", spec.kv.kv_transfer_config] if spec.kv is not None else []
    return [
        *model,
        "--port",
        str(spec.port),
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",
        *kv,
        *spec.vllm_args,
    ]


def vllm_docker_command(spec: BootSpec) -> str:
    """`docker run` of vLLM. Secrets travel as `-e NAME` (value taken from the boot shell's
    environment), so they never appear on a command line; vLLM reads `VLLM_API_KEY` exactly as
    it reads `--api-key`, LMCache reads `LMCACHE_REMOTE_URL` (it holds the store's AUTH token)
    as its `remote_url`."""
    env = ""
    if spec.hf_token_secret_arn:
        env += " -e HUGGING_FACE_HUB_TOKEN"
    if spec.api_key_secret_arn:
        env += " -e VLLM_API_KEY"
    if spec.kv is not None:
        env += " -e LMCACHE_REMOTE_URL"
        env += "".join(f" -e {shlex.quote(f'{name}={value}')}" for name, value in spec.kv.env)
        if spec.kv.tmpfs:
            env += f" --tmpfs {shlex.quote(spec.kv.tmpfs)}"
    return (
        "docker run -d --name vllm --restart unless-stopped --runtime nvidia --gpus all --ipc=host"
        f" -p {spec.port}:{spec.port} -v /opt/hf-cache:/root/.cache/huggingface{env}"
        f" {shlex.quote(spec.vllm_image)} " + " ".join(shlex.quote(a) for a in vllm_args(spec))
    )


def prometheus_config(spec: BootSpec) -> str:
    """Prometheus scrape config read by the CloudWatch agent (YAML is a JSON superset)."""
    cfg = {
        "global": {"scrape_interval": "30s", "scrape_timeout": "10s"},
        "scrape_configs": [
            {
                "job_name": "vllm",
                "metrics_path": "/metrics",
                "static_configs": [
                    {
                        "targets": [f"localhost:{spec.port}"],
                        "labels": {"Fleet": spec.fleet_name, "InstanceId": INSTANCE_ID_PLACEHOLDER},
                    }
                ],
            }
        ],
    }
    return json.dumps(cfg, indent=2)


def cloudwatch_agent_config(spec: BootSpec) -> dict:
    """Agent config: Prometheus `/metrics` -> EMF -> metrics by Fleet and by Fleet+InstanceId;
    the proxy's JSON access log -> a log group, one stream per instance."""
    scraped = SCRAPED_METRICS + (LMCACHE_SCRAPED_METRICS if spec.kv is not None else ())
    selectors = ["^" + m.replace(":", "[:]") + "$" for m in scraped]
    logs: dict = {
        "force_flush_interval": 5,
        "metrics_collected": {
            "emf": {},
            "prometheus": {
                "log_group_name": spec.log_group_name,
                "prometheus_config_path": f"{_AGENT_DIR}/etc/prometheus.yaml",
                "emf_processor": {
                    "metric_declaration_dedup": True,
                    "metric_namespace": METRIC_NAMESPACE,
                    "metric_declaration": [
                        {
                            "source_labels": ["job"],
                            "label_matcher": "^vllm$",
                            "dimensions": [["Fleet"], ["Fleet", "InstanceId"]],
                            "metric_selectors": selectors,
                        }
                    ],
                },
            },
        },
    }
    if spec.proxy is not None and spec.access_log_group_name:
        logs["logs_collected"] = {
            "files": {
                "collect_list": [
                    {
                        "file_path": spec.proxy.access_log,
                        "log_group_name": spec.access_log_group_name,
                        "log_stream_name": "{instance_id}",
                        "timezone": "UTC",
                    }
                ]
            }
        }
    return {"agent": {"metrics_collection_interval": 60, "run_as_user": "cwagent"}, "logs": logs}


def _q(text: str) -> str:
    """An nginx double-quoted string (the values put here never contain quotes or backslashes
    except the regex escapes written on purpose)."""
    return '"' + text + '"'


def _sid_map(source: str, target: str) -> list[str]:
    """`target` = `source` when it fully matches the session id pattern, else empty. `\\z` (not
    `$`, which PCRE also matches before a final newline) anchors the end."""
    return [
        f"  map {source} {target} {{",
        f"    {_q('~^' + _SID_CLASS + chr(92) + 'z')} {source};",
        '    default "";',
        "  }",
    ]


def nginx_config(spec: ProxySpec, upstream_port: int, *, upstream_host: str = "127.0.0.1") -> str:
    """nginx.conf of the on-instance proxy (pure: the probe lab runs it in a real nginx).

    Every response gets `X-Served-By: <instance id>`; every request one JSON access line
    (`time` ISO-8601 UTC with ms, `ts` epoch seconds with ms, `instance`, `session` and
    `session_source` (header, cookie or query; null when none is valid), `method`, `path`,
    `status`, `request_time`, `upstream_response_time` (null without upstream), `bytes_sent`).
    Every value written to the line is either a number nginx produces or text that matched a
    strict pattern, so each line is valid JSON whatever the client sends.

    With `spec.cookie_name`: the cookie is set from the session header, or re-set from the cookie
    the client sent, on every response from vLLM to a request that carries a valid session id
    (after a failover the new target must set it again for the ALB to re-pin); never on a
    response the proxy produced itself. A session header that is present but does
    not fully match the pattern is refused with 400 on `/v1/` and no cookie is set: an agent
    whose session id were silently dropped would lose its affinity without any signal.
    Only `/v1/…` and `/health` are forwarded; the rest (`/metrics` and `/version` included) is 404.
    """
    header_var = "$http_" + spec.session_header.lower().replace("-", "_")
    lines = [
        "worker_processes auto;",
        "events { worker_connections 4096; }",
        "http {",
        "  server_tokens off;",
        "  default_type application/json;",
    ]
    lines += _sid_map(header_var, "$llm_affinity_hdr_sid")
    lines += [
        f"  map {header_var} $llm_affinity_hdr_bad {{",
        '    "" 0;',
        f"    {_q('~^' + _SID_CLASS + chr(92) + 'z')} 0;",
        "    default 1;",
        "  }",
    ]
    cookie_sid = query_sid = ""
    if spec.cookie_name:
        lines += _sid_map(f"$cookie_{spec.cookie_name}", "$llm_affinity_ck_sid")
        cookie_sid = "$llm_affinity_ck_sid"
    if spec.session_query:
        lines += _sid_map(f"$arg_{spec.session_query}", "$llm_affinity_q_sid")
        query_sid = "$llm_affinity_q_sid"
    bs = chr(92)
    # the ids below cannot contain "|": it separates the sources safely
    lines += [
        f'  map "$llm_affinity_hdr_sid|{cookie_sid}|{query_sid}" $llm_affinity_log_session {{',
        f'    "~^(?<llm_affinity_s1>[^|]+){bs}|" "{bs}"$llm_affinity_s1{bs}"";',
        f'    "~^{bs}|(?<llm_affinity_s2>[^|]+){bs}|" "{bs}"$llm_affinity_s2{bs}"";',
        f'    "~^{bs}|{bs}|(?<llm_affinity_s3>[^|]+){bs}z" "{bs}"$llm_affinity_s3{bs}"";',
        '    default "null";',
        "  }",
        f'  map "$llm_affinity_hdr_sid|{cookie_sid}|{query_sid}" $llm_affinity_log_source {{',
        f'    "~^[^|]+{bs}|" "{bs}"header{bs}"";',
        f'    "~^{bs}|[^|]+{bs}|" "{bs}"cookie{bs}"";',
        f'    "~^{bs}|{bs}|[^|]+{bs}z" "{bs}"query{bs}"";',
        '    default "null";',
        "  }",
        # time: ISO-8601 with milliseconds, composed from the cached time nginx logs with
        f'  map $time_iso8601 $llm_affinity_t19 {{ "~^(?<llm_affinity_t>{bs}d{{4}}-{bs}d{bs}d-{bs}d{bs}dT{bs}d{bs}d:{bs}d{bs}d:{bs}d{bs}d)" $llm_affinity_t; default "1970-01-01T00:00:00"; }}',
        f'  map $time_iso8601 $llm_affinity_tz {{ "~(?<llm_affinity_z>[+-]{bs}d{bs}d:{bs}d{bs}d|Z){bs}z" $llm_affinity_z; default "Z"; }}',
        f'  map $msec $llm_affinity_ms {{ "~{bs}.(?<llm_affinity_m>{bs}d{{3}}){bs}z" $llm_affinity_m; default "000"; }}',
        f'  map $request_method $llm_affinity_method {{ "~^[A-Z]{{1,16}}{bs}z" $request_method; default "OTHER"; }}',
        f'  map $uri $llm_affinity_path {{ "~^/[A-Za-z0-9._~/-]{{0,255}}{bs}z" $uri; default "?"; }}',
        f'  map $upstream_response_time $llm_affinity_urt {{ "~^{bs}d+{bs}.{bs}d+{bs}z" $upstream_response_time; default "null"; }}',
        "  log_format llm_affinity escape=none '{"
        '"time":"${llm_affinity_t19}.${llm_affinity_ms}${llm_affinity_tz}","ts":$msec,'
        f'"instance":"{spec.instance_id}","session":$llm_affinity_log_session,'
        '"session_source":$llm_affinity_log_source,"method":"$llm_affinity_method",'
        '"path":"$llm_affinity_path","status":$status,"request_time":$request_time,'
        '"upstream_response_time":$llm_affinity_urt,"bytes_sent":$bytes_sent'
        "}';",
        f"  access_log {spec.access_log} llm_affinity;",
    ]
    if spec.cookie_name:
        attrs = "; Path=/; HttpOnly; SameSite=" + spec.same_site + ("; Secure" if spec.secure_cookie else "")
        lines += [
            f'  map "$llm_affinity_hdr_bad|$llm_affinity_hdr_sid|{cookie_sid}" $llm_affinity_sid {{',
            f'    "~^0{bs}|(?<llm_affinity_h>[^|]+){bs}|" $llm_affinity_h;',
            f'    "~^0{bs}|{bs}|(?<llm_affinity_c>[^|]+){bs}z" $llm_affinity_c;',
            '    default "";',
            "  }",
            # only on responses from vLLM (any status): never on one the proxy or nginx produced itself
            # (a refused id, a 404 path, a malformed request), where $upstream_status is empty
            '  map "$upstream_status|$llm_affinity_sid" $llm_affinity_set_cookie {',
            f'    "~{bs}|{bs}z" "";',
            f'    "~^{bs}|" "";',
            f'    default "{spec.cookie_name}=$llm_affinity_sid{attrs}";',
            "  }",
        ]
    lines += _server_block(spec, f"http://{upstream_host}:{upstream_port}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _server_block(spec: ProxySpec, upstream: str) -> list[str]:
    """The `server` block: streaming proxy settings, `X-Served-By` (and the app cookie), the
    inference API and `/health` forwarded to `upstream`, 404 for everything else."""
    lines = [
        "  server {",
        f"    listen {spec.listen_port};",
        "    client_max_body_size 64m;",
        "    absolute_redirect off;  # behind TLS termination an absolute redirect would say http://",
        "    proxy_http_version 1.1;",
        '    proxy_set_header Connection "";',
        "    proxy_set_header Host $host;",
        "    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
        "    proxy_hide_header X-Served-By;",
        "    proxy_buffering off;",
        "    proxy_request_buffering off;",
        "    proxy_cache off;",
        "    proxy_read_timeout 3600s;",
        "    proxy_send_timeout 3600s;",
        f'    add_header X-Served-By "{spec.instance_id}" always;',
    ]
    if spec.cookie_name:
        lines.append("    add_header Set-Cookie $llm_affinity_set_cookie always;")
    refuse = ""
    if spec.cookie_name:
        # no "$" in the text: nginx would read it as a variable
        msg = f"{spec.session_header} must be 1-128 characters of A-Z a-z 0-9 . _ ~ -"
        body = '{"error":{"message":"' + msg + '","type":"invalid_request_error","code":400}}'
        refuse = f"      if ($llm_affinity_hdr_bad) {{ return 400 '{body}'; }}\n"
    lines.append(f"    location {PROXIED_PREFIX} {{\n{refuse}      proxy_pass {upstream};\n    }}")
    for path in PROXIED_EXACT:
        lines.append(f"    location = {path} {{ proxy_pass {upstream}; }}")
    lines.append('    location / { return 404 \'{"error":{"message":"not found","type":"not_found","code":404}}\'; }')
    lines.append("  }")
    return lines


def exporter_source() -> str:
    return resources.files("llm_affinity.constructs").joinpath("assets/ttft_exporter.py").read_text()


def _heredoc(path: str, body: str, marker: str) -> list[str]:
    assert marker not in body
    return [f"cat > {path} <<'{marker}'", *body.rstrip("\n").split("\n"), marker]


def _packed_file(path: str, body: str, marker: str) -> list[str]:
    """A file written from gzip+base64 text: raw user data is limited to 16 KB and the exporter
    alone is 6.5 KB as plain text."""
    packed = base64.b64encode(gzip.compress(body.encode(), mtime=0)).decode()
    return [
        f"base64 -d <<'{marker}' | gunzip > {path}",
        *(packed[i : i + 76] for i in range(0, len(packed), 76)),
        marker,
    ]


def _secret_to_env(var: str, arn: str) -> list[str]:
    """Read a secret on the host (instance role) into an exported variable, never echoed."""
    return [
        f"{var}=$(aws secretsmanager get-secret-value --secret-id '{arn}' --query SecretString --output text)",
        f"export {var}",
    ]


def lmcache_remote_url_commands(kv: KvSpec) -> list[str]:
    """Shell lines that build `LMCACHE_REMOTE_URL` on the host: the store's AUTH token is read
    from Secrets Manager with the instance role and must be 16-128 letters and digits (URL-safe:
    the secret is generated without punctuation), the endpoint comes from the template; nothing
    is printed. `rediss://` is TLS with certificate and host-name checks (redis-py's default)."""
    return [
        "# LMCache's shared store: the URL carries the AUTH token, so it is built here and never written down",
        f"LMCACHE_STORE_HOST='{kv.host}'",
        f"LMCACHE_STORE_PORT='{kv.port}'",
        '[[ "$LMCACHE_STORE_HOST" =~ ^[A-Za-z0-9.-]{1,253}$ && "$LMCACHE_STORE_PORT" =~ ^[0-9]{1,5}$ ]] || '
        '{ echo "unexpected LMCache store endpoint" >&2; exit 1; }',
        f"LMCACHE_AUTH_TOKEN=$(aws secretsmanager get-secret-value --secret-id '{kv.auth_secret_arn}' "
        "--query SecretString --output text)",
        '[[ "$LMCACHE_AUTH_TOKEN" =~ ^[A-Za-z0-9]{16,128}$ ]] || '
        '{ echo "the LMCache store AUTH token is not 16-128 letters and digits" >&2; exit 1; }',
        'LMCACHE_REMOTE_URL="rediss://:${LMCACHE_AUTH_TOKEN}@${LMCACHE_STORE_HOST}:${LMCACHE_STORE_PORT}"',
        "export LMCACHE_REMOTE_URL",
        "unset LMCACHE_AUTH_TOKEN",
    ]


def boot_commands(spec: BootSpec) -> list[str]:
    """Shell lines of the boot script (vLLM, proxy, CloudWatch agent, TTFT exporter)."""
    agent_json = json.dumps(cloudwatch_agent_config(spec), separators=(",", ":"))
    lines = [
        "set -euo pipefail",
        "exec > >(tee /var/log/llm-affinity-boot.log) 2>&1",
        'IMDS_TOKEN=$(curl -sf -X PUT http://169.254.169.254/latest/api/token -H "X-aws-ec2-metadata-token-ttl-seconds: 300")',
        'INSTANCE_ID=$(curl -sf -H "X-aws-ec2-metadata-token: $IMDS_TOKEN" http://169.254.169.254/latest/meta-data/instance-id)',
        '[[ "$INSTANCE_ID" =~ ^i-[0-9a-f]{8,17}$ ]] || { echo "unexpected instance id: $INSTANCE_ID" >&2; exit 1; }',
        f"mkdir -p {_CFG_DIR} /opt/hf-cache {_AGENT_DIR}/etc {_LOG_DIR}",
        f"chmod 755 {_LOG_DIR}",
    ]
    if spec.hf_token_secret_arn:
        lines += _secret_to_env("HUGGING_FACE_HUB_TOKEN", spec.hf_token_secret_arn)
    if spec.api_key_secret_arn:
        lines += _secret_to_env("VLLM_API_KEY", spec.api_key_secret_arn)
    if spec.kv is not None:
        lines += lmcache_remote_url_commands(spec.kv)
    lines.append("# vLLM (OpenAI-compatible server) with prefix caching on")
    lines.append(vllm_docker_command(spec))
    if spec.proxy is not None:
        lines += proxy_commands(spec.proxy, spec.port)
    lines.append("# CloudWatch agent (on the host): Prometheus /metrics -> per-instance metrics, access log -> logs")
    lines.append(f"if ! command -v {_AGENT_DIR}/bin/amazon-cloudwatch-agent-ctl >/dev/null; then")
    lines.append("  ARCH=$(dpkg --print-architecture)")
    lines.append(
        '  curl -sfo /tmp/cwagent.deb "https://amazoncloudwatch-agent.s3.amazonaws.com/ubuntu/${ARCH}/latest/amazon-cloudwatch-agent.deb"'
    )
    lines.append("  dpkg -i -E /tmp/cwagent.deb")
    lines.append("fi")
    lines += _heredoc(f"{_AGENT_DIR}/etc/prometheus.yaml", prometheus_config(spec), "LLM_AFFINITY_PROM")
    lines += _heredoc(f"{_AGENT_DIR}/etc/llm-affinity-agent.json", agent_json, "LLM_AFFINITY_AGENT")
    lines.append(f'sed -i "s/{INSTANCE_ID_PLACEHOLDER}/$INSTANCE_ID/" {_AGENT_DIR}/etc/prometheus.yaml')
    lines.append(
        f"{_AGENT_DIR}/bin/amazon-cloudwatch-agent-ctl -a fetch-config -m ec2 -s "
        f"-c file:{_AGENT_DIR}/etc/llm-affinity-agent.json"
    )
    lines.append("# TTFT p50/p95 (the agent drops Prometheus histograms)")
    lines += _packed_file(f"{_CFG_DIR}/ttft_exporter.py", exporter_source(), "LLM_AFFINITY_EXPORTER")
    lines += _heredoc(
        "/etc/systemd/system/llm-affinity-ttft.service",
        (
            "[Unit]\nDescription=llm-affinity TTFT exporter\nAfter=network-online.target\n"
            "[Service]\n"
            f"ExecStart=/usr/bin/python3 {_CFG_DIR}/ttft_exporter.py --namespace {METRIC_NAMESPACE}"
            f" --fleet {spec.fleet_name} --instance-id {INSTANCE_ID_PLACEHOLDER} --log-group {spec.log_group_name}"
            f" --url http://127.0.0.1:{spec.port}/metrics{' --lmcache' if spec.kv is not None else ''}\n"
            "Restart=always\nDynamicUser=yes\n[Install]\nWantedBy=multi-user.target"
        ),
        "LLM_AFFINITY_UNIT",
    )
    lines.append(f'sed -i "s/{INSTANCE_ID_PLACEHOLDER}/$INSTANCE_ID/" /etc/systemd/system/llm-affinity-ttft.service')
    lines.append("systemctl daemon-reload && systemctl enable --now llm-affinity-ttft.service")
    return lines


def proxy_commands(proxy: ProxySpec, upstream_port: int) -> list[str]:
    """Shell lines that start the proxy. nginx runs on the default bridge network (not the
    host's): with a metadata hop limit of 1 it cannot reach IMDS, and it reaches vLLM through
    the host gateway."""
    lines = ["# nginx: X-Served-By, JSON access log, API paths only (and the app cookie in app-cookie mode)"]
    lines += _heredoc(
        f"{_CFG_DIR}/nginx.conf",
        nginx_config(proxy, upstream_port, upstream_host="host.docker.internal"),
        "LLM_AFFINITY_NGINX",
    )
    lines.append(f'sed -i "s/{INSTANCE_ID_PLACEHOLDER}/$INSTANCE_ID/g" {_CFG_DIR}/nginx.conf')
    lines += _heredoc(
        "/etc/logrotate.d/llm-affinity",
        f"{proxy.access_log} {{\n  daily\n  rotate 3\n  compress\n  missingok\n  notifempty\n  copytruncate\n}}",
        "LLM_AFFINITY_LOGROTATE",
    )
    lines.append(
        "docker run -d --name llm-affinity-proxy --restart unless-stopped"
        f" --add-host host.docker.internal:host-gateway -p {proxy.listen_port}:{proxy.listen_port}"
        f" -v {_CFG_DIR}/nginx.conf:/etc/nginx/nginx.conf:ro -v {_LOG_DIR}:{_LOG_DIR}"
        f" {shlex.quote(proxy.image)}"
    )
    return lines
