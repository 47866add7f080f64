"""Shared test helpers: fixture paths and running the CLI in-process or as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
RULE_FIXTURES = FIXTURES / "rules"
#: Vendored third-party test data (tests/data/README.md; licences in NOTICE).
DATA = Path(__file__).resolve().parent / "data"
SARIF_SCHEMA = DATA / "sarif-schema-2.1.0.json"
CORPUS = DATA / "corpus"
#: Wheels the install tests (test_packaging.py, the pre-commit hook of test_ci.py) install
#: offline; kept across runs, filled once from pip's cache or the index.
WHEELHOUSE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llm-affinity-tests" / "wheelhouse"

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


#: Kept from the caller's environment although they start with CDK_: where the CDK CLI keeps
#: its state (.ci/run points it inside the checkout) and its version check switch.
_KEPT_CDK_VARS = ("CDK_HOME", "CDK_DISABLE_VERSION_CHECK")


def isolated_env(**extra: str) -> dict[str, str]:
    """The environment for a CDK app or the CDK CLI in a subprocess: no AWS credentials or
    profile, no CDK_* context/outdir from an outer `cdk` run, the jsii end-of-life warning off."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") and (not k.startswith("CDK_") or k in _KEPT_CDK_VARS)
    }
    env.update(
        {
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
            **extra,
        }
    )
    return env


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python -m llm_affinity` as a user would (separate process, real exit code)."""
    full_env = dict(os.environ, NO_COLOR="1", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "llm_affinity", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=full_env,
        timeout=120,
    )


def lint_json(*args: str) -> tuple[int, dict]:
    proc = run_cli("lint", "--format", "json", *args)
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture
def write(tmp_path):
    """Write a template (text) into tmp_path and return its path as a string."""

    def _write(name: str, text: str | bytes) -> str:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return str(path)

    return _write
