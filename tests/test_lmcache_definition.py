"""The one definition of "this fleet shares KV through LMCache" (common.definitions.lmcache_in)
and the launch-text reader under it: connectors as vLLM's registry names them, the remote URL as
LMCache reads it (kv_connector_extra_config, LMCACHE_REMOTE_URL, remote_url in its YAML), shell
expansion, references to other resources, holes, masking, and the bounds on hostile text."""

from __future__ import annotations

import pytest

from llm_affinity.common import launch_text as lt
from llm_affinity.common.definitions import LMCACHE_BACKENDS, LMCACHE_CONNECTORS, lmcache_backend, lmcache_in

V1 = """--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'"""


def serve(flag: str = V1, before: str = "") -> str:
    return f"#!/bin/bash\n{before}\ndocker run -d --gpus all lmcache/vllm-openai:v0.5.6 Qwen/Qwen2.5-7B {flag}\n"


@pytest.mark.parametrize(
    "flag, connector",
    [
        (V1, "LMCacheConnectorV1"),
        ("""--kv-transfer-config '{"kv_connector":"LMCacheConnector","kv_role":"kv_both"}'""", "LMCacheConnector"),
        ("""--kv_transfer_config={"kv_connector": "LMCacheConnectorV1"}""", "LMCacheConnectorV1"),
        (
            '--kv-transfer-config "{\\"kv_connector\\":\\"LMCacheConnectorV1\\",\\"kv_role\\":\\"kv_both\\"}"',
            "LMCacheConnectorV1",
        ),
        (
            "--kv-transfer-config.kv_connector=LMCacheConnectorV1 --kv-transfer-config.kv_role=kv_both",
            "LMCacheConnectorV1",
        ),
        (
            """--kv-transfer-config '{"kv_connector":"LMCacheMPConnector","kv_connector_module_path":"""
            """"lmcache.integration.vllm.lmcache_mp_connector","kv_role":"kv_both"}'""",
            "LMCacheMPConnector",
        ),
        (
            """--kv-transfer-config '{"kv_connector":"MyLMCache","kv_connector_module_path":"lmcache.x.y"}'""",
            "MyLMCache",
        ),
        (
            """--kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":"""
            """{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_both"},"""
            """{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}]}}'""",
            "LMCacheConnectorV1",
        ),
    ],
)
def test_every_lmcache_connector_form_is_recognised(flag, connector):
    use = lmcache_in(serve(flag))
    assert use is not None and use.connector == connector


@pytest.mark.parametrize(
    "text",
    [
        serve("""--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'"""),
        serve("--enable-prefix-caching"),
        "# LMCacheConnectorV1 is described in docs/lmcache.md\nvllm serve m",
        "LMCACHE_REMOTE_URL=redis://cache:6379\nvllm serve m",  # LMCache settings alone start no connector
        "",
    ],
)
def test_no_lmcache_connector_is_no_kv_sharing(text):
    assert lmcache_in(text) is None


def test_the_connector_list_is_vllms_registry():
    assert set(LMCACHE_CONNECTORS) == {"LMCacheConnectorV1", "LMCacheConnector", "LMCacheMPConnector"}
    assert len({b.scheme for b in LMCACHE_BACKENDS}) == len(LMCACHE_BACKENDS)


def test_without_a_remote_url_the_kv_stays_on_the_instance():
    use = lmcache_in(serve(before="export LMCACHE_LOCAL_CPU=True"))
    assert use.remote is None and use.unknown is None and use.shares is False
    assert "no remote_url" in use.local


@pytest.mark.parametrize(
    "url, shared, tls, credentials",
    [
        ("redis://cache.internal:6379", True, False, False),
        ("rediss://:tok3n@cache.internal:6379", True, True, True),
        ("rediss://cache.internal:6379", True, True, False),
        ("rediss://lmcache:pa55@cache.internal:6379/0", True, True, True),
        ("redis-cluster://a:6379,b:6379", True, False, False),
        ("redis-sentinel://a:26379,b:26379/mymaster", True, False, False),
        ("lm://10.0.3.7:65432", True, False, False),
        ("lm://localhost:65432", False, False, False),
        ("redis://127.0.0.1:6379", False, False, False),
        ("unix:///var/run/redis.sock", False, None, False),
        ("s3://bucket--use1-az4--x-s3", True, True, True),
        ("infinistore://10.0.0.2:12345", None, None, None),  # not in the list: unknown, never guessed
        ("fs://mnt/shared/kv", None, None, None),
    ],
)
def test_remote_backend_by_scheme(url, shared, tls, credentials):
    use = lmcache_in(serve(before=f"export LMCACHE_REMOTE_URL={url}"))
    r = use.remote
    assert (r.shared, r.tls, r.credentials) == (shared, tls, credentials)
    assert use.shares is shared
    assert r.source == "LMCACHE_REMOTE_URL"


def test_valkey_and_s3_options_come_from_extra_config():
    on = lmcache_in(
        serve(
            before='LMCACHE_REMOTE_URL=valkey://c:6379\nLMCACHE_EXTRA_CONFIG={"tls_enable": true, "valkey_password": "p"}'
        )
    )
    assert (on.remote.tls, on.remote.credentials) == (True, True)
    off = lmcache_in(serve(before="LMCACHE_REMOTE_URL=valkey://c:6379"))
    assert (off.remote.tls, off.remote.credentials) == (False, False)
    yaml = lmcache_in(
        serve(before="cat > c.yaml <<'Y'\nremote_url: valkey://c:6379\nextra_config:\n  tls_enable: true\nY")
    )
    assert yaml.remote.tls is True and yaml.remote.source == "remote_url in the LMCache configuration"
    s3 = lmcache_in(serve(before="LMCACHE_REMOTE_URL=s3://b\nLMCACHE_EXTRA_CONFIG='{\"disable_tls\": true}'"))
    assert s3.remote.tls is False


def test_precedence_extra_config_then_environment_then_file():
    flag = (
        """--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both","""
        """"kv_connector_extra_config":{"lmcache.remote_url":"rediss://x:6379"}}'"""
    )
    both = "export LMCACHE_REMOTE_URL=redis://y:6379\nremote_url: lm://z:1"
    assert lmcache_in(serve(flag, both)).remote.host == "x"
    assert lmcache_in(serve(V1, both)).remote.host == "y"
    assert lmcache_in(serve(V1, "remote_url: lm://z:1")).remote.host == "z"


def test_shell_variables_are_expanded_and_secrets_masked():
    before = (
        "TOKEN=$(aws secretsmanager get-secret-value --secret-id t --query SecretString --output text)\n"
        "HOST='master.kv.abc123.use1.cache.amazonaws.com'\n"
        'LMCACHE_REMOTE_URL="rediss://:${TOKEN}@${HOST}:6379"\n'
        "docker run -e LMCACHE_REMOTE_URL ..."
    )
    r = lmcache_in(serve(before=before)).remote
    assert r.host == "master.kv.abc123.use1.cache.amazonaws.com" and r.credentials is True
    assert r.url == "rediss://:***@master.kv.abc123.use1.cache.amazonaws.com:6379"
    literal = lmcache_in(serve(before="LMCACHE_REMOTE_URL=rediss://lmcache:s3cr3t@h:6379")).remote
    assert "s3cr3t" not in literal.url and literal.url == "rediss://lmcache:***@h:6379"


def test_a_reference_to_another_resource_names_it():
    ref = lt.reference("Store.PrimaryEndPoint.Address")
    r = lmcache_in(
        serve(before=f"LMCACHE_STORE_HOST='{ref}'\nexport LMCACHE_REMOTE_URL=rediss://:$T@$LMCACHE_STORE_HOST:6379")
    ).remote
    assert r.host is None and r.host_ref == "Store.PrimaryEndPoint.Address" and r.shared is True
    assert r.url == "rediss://:***@${Store.PrimaryEndPoint.Address}:6379"


@pytest.mark.parametrize(
    "before, hidden, why",
    [
        (
            "LMCACHE_REMOTE_URL=$(aws ssm get-parameter --name /kv/url --query Parameter.Value --output text)",
            None,
            "set at run time",
        ),
        (f"LMCACHE_REMOTE_URL={lt.HOLE}", None, "set at run time"),
        (
            "export LMCACHE_CONFIG_FILE=/etc/lmcache/config.yaml",
            None,
            "LMCACHE_CONFIG_FILE names /etc/lmcache/config.yaml",
        ),
        ("", "an environment file (EnvironmentFiles)", "may come from an environment file"),
    ],
)
def test_what_cannot_be_known_is_unknown(before, hidden, why):
    use = lmcache_in(serve(before=before), hidden=hidden)
    assert use.remote is None and use.shares is None and why in use.unknown


def test_an_unknown_host_is_not_guessed_shared():
    r = lmcache_in(serve(before="export LMCACHE_REMOTE_URL=redis://$UNDEFINED:6379")).remote
    assert r.host is None and r.host_ref is None and r.shared is None


@pytest.mark.parametrize(
    "extra, before, shares, unknown",
    [
        ('"lmcache.mp.host":"tcp://10.0.5.9","lmcache.mp.port":5555', "", True, None),
        ("", "lmcache server --l1-size-gb 20 --port 5555 &", False, None),
        ("", 'lmcache server --port 5555 --l2-adapter \'{"type":"fs","base_path":"/l2"}\' &', None, "--l2-adapter"),
        ("", "", None, "not in the launch command"),
    ],
)
def test_multiprocess_mode_judges_where_the_lmcache_server_is(extra, before, shares, unknown):
    flag = (
        """--kv-transfer-config '{"kv_connector":"LMCacheMPConnector","kv_role":"kv_both","""
        f""""kv_connector_extra_config":{{{extra}}}}}'"""
    )
    use = lmcache_in(serve(flag, before))
    assert use.shares is shares
    assert (use.unknown is None) if unknown is None else (unknown in use.unknown)
    if shares:
        assert use.remote.scheme == "tcp" and use.remote.tls is None  # not judged: unknown


def test_backend_lookup():
    assert lmcache_backend("REDISS").tls == "always"
    assert lmcache_backend("lm").auth == "never"
    assert lmcache_backend("nope") is None and lmcache_backend(None) is None


def test_hostile_text_is_bounded():
    many = "--kv-transfer-config " * 50_000 + V1
    assert lmcache_in(many) is None  # the 16 flags read are not JSON; the rest is not read
    deep = "A=$B\nB=$A\n" + "LMCACHE_REMOTE_URL=redis://$A:6379\n" + serve()
    assert lmcache_in(deep).remote.host is None  # a loop of variables ends as a hole
    wide = "X=" + "$Y" * 2000 + "\nY=" + "$X" * 2000 + "\nLMCACHE_REMOTE_URL=redis://h$X:1\n" + serve()
    assert lmcache_in(wide).remote.host is None
    assert lmcache_in(serve() + "\x00" * (2 << 20)) is not None


def test_url_parts():
    url = lt.parse_url("redis-sentinel://u:p@h1:26379,h2:26380/master")
    assert url.hosts == ("h1", "h2") and url.port == "26379" and url.password == "p"
    assert lt.masked(url) == "redis-sentinel://u:***@h1:26379,h2:26380/master"
    assert lt.parse_url("no scheme here") is None
    assert lt.parse_url("rediss://[::1]:6379").host == "::1" and lt.is_loopback("::1")
    assert lt.display(f"x {lt.reference('A.B')} {lt.HOLE}") == f"x ${{A.B}} {lt.HOLE}"


def test_a_kubernetes_container_through_the_same_function():
    """What a Kubernetes source passes: the container's command and args, its env as lines (a
    valueFrom entry as unknown, never absent) and envFrom as hidden."""
    from llm_affinity.common.definitions import environment_lines

    args = ["vllm", "serve", "m", "--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
    env = [
        {"name": "LMCACHE_REMOTE_URL", "value": "rediss://lmcache-valkey.kv.svc.cluster.local:6379"},
        {"name": "LMCACHE_CHUNK_SIZE", "value": "256"},
    ]
    use = lmcache_in(" ".join(args), environment_lines(env))
    assert use.remote.host == "lmcache-valkey.kv.svc.cluster.local" and use.shares is True
    secret = [{"name": "LMCACHE_REMOTE_URL", "valueFrom": {"secretKeyRef": {"name": "kv", "key": "url"}}}]
    assert environment_lines(secret) == f"LMCACHE_REMOTE_URL={lt.HOLE}"
    assert lmcache_in(" ".join(args), environment_lines(secret)).shares is None
    assert lmcache_in(" ".join(args), None, hidden="envFrom (configMapRef lmcache)").shares is None
    assert lmcache_in(" ".join(args)).shares is False
