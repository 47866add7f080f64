"""The `vllm_args` guard reads arguments the way vLLM's `FlexibleArgumentParser` does (no CDK here).

The oracle below is a stdlib `argparse` parser with vLLM's defaults (`allow_abbrev=True`) and a
few of `vllm serve`'s real option names, fed through the rewrite vLLM applies before parsing
(vllm/utils/argparse_utils.py: for an argument starting with `--`, the text before `=` has `_`
replaced by `-` up to the first `.`). Every argument the guard refuses must be one that parser
reads as the forbidden option (or as an ambiguous prefix vLLM would refuse to start with), and
the harmless ones must pass.
"""

from __future__ import annotations

import argparse
import re

import pytest

from llm_affinity.constructs._vllm_args import masked, option_name, refused_args

#: a subset of `vllm serve` options whose names share prefixes with the forbidden ones
VLLM_OPTIONS = (
    "--api-key",
    "--api-server-count",
    "--hf-token",
    "--hf-overrides",
    "--max-model-len",
    "--kv-transfer-config",
    "--enable-prompt-tokens-details",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # raise instead of printing usage and exiting
        raise ValueError(message)


def _oracle() -> argparse.ArgumentParser:
    parser = _Parser(allow_abbrev=True, add_help=False, exit_on_error=False)
    for opt in VLLM_OPTIONS:
        parser.add_argument(opt, dest=opt[2:].replace("-", "_"))
    parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    return parser


def _vllm_rewrite(arg: str) -> str:
    if not arg.startswith("--"):
        return arg
    key, eq, value = arg.partition("=")
    key = re.sub(r"(?<=--)[^.]*", lambda m: m.group(0).replace("_", "-"), key, count=1)
    return key + eq + value


def _oracle_reads(args: list[str]) -> dict | str:
    """What the oracle parser makes of `args`: the namespace, or "error: …"."""
    parser = _oracle()
    try:
        ns, rest = parser.parse_known_args([_vllm_rewrite(a) for a in args])
    except (argparse.ArgumentError, ValueError) as exc:
        return f"error: {exc}"
    return {k: v for k, v in vars(ns).items() if v is not None}


@pytest.mark.parametrize(
    "args,option",
    [
        (["--api-key", "SECRET"], "--api-key"),
        (["--api_key", "SECRET"], "--api-key"),
        (["--api_key=SECRET"], "--api-key"),
        (["--api-key=SECRET"], "--api-key"),
        (["--api-k", "SECRET"], "--api-key"),
        (["--api-ke=SECRET"], "--api-key"),
        (["--api_k=SECRET"], "--api-key"),
        (["--hf-token", "hf_abc"], "--hf-token"),
        (["--hf_token=hf_abc"], "--hf-token"),
        (["--hf-t", "hf_abc"], "--hf-token"),
        (["--no-enable-prefix-caching"], "--no-enable-prefix-caching"),
        (["--no_enable_prefix_caching"], "--no-enable-prefix-caching"),
        (["--no-enable-prefix"], "--no-enable-prefix-caching"),
        (["--no_enable_pre"], "--no-enable-prefix-caching"),
    ],
)
def test_refused_where_vllm_reads_the_forbidden_option(args, option):
    (refused,) = refused_args(args)
    assert refused.index == 0 and refused.option == option
    assert "SECRET" not in refused.shown and "hf_abc" not in refused.shown
    read = _oracle_reads(args)
    if option == "--no-enable-prefix-caching":
        assert read == {"enable_prefix_caching": False}
    else:
        assert read == {option[2:].replace("-", "_"): args[-1].split("=", 1)[-1]}


@pytest.mark.parametrize("args", [["--api", "x"], ["--api-", "x"], ["--hf", "x"], ["--hf-", "x"]])
def test_ambiguous_prefixes_are_refused_too(args):
    """vLLM would not start with these (ambiguous option); refusing them moves the failure to synth."""
    assert _oracle_reads(args).startswith("error: ambiguous option")
    assert [r.option for r in refused_args(args)] in (["--api-key"], ["--hf-token"])


def test_a_value_for_enable_prefix_caching_is_refused_a_bare_flag_passes():
    assert refused_args(["--enable-prefix-caching"]) == []
    assert refused_args(["--enable_prefix_caching"]) == []
    for arg in ("--enable-prefix-caching=false", "--enable_prefix_caching=0", "--enable-prefix-caching.x=1"):
        (refused,) = refused_args([arg])
        assert refused.option == "--enable-prefix-caching", arg
    assert _oracle_reads(["--enable_prefix_caching=false"]).startswith("error: argument --enable-prefix-caching")


def test_dotted_json_keys_name_their_option():
    """`--api_key.x SECRET` would reach vLLM as `--api-key '{"x": "SECRET"}'`: still the key."""
    assert option_name("--api_key.x") == "--api-key"
    assert option_name("--kv_transfer_config.kv_role=kv_both") == "--kv-transfer-config"
    assert [r.option for r in refused_args(["--api_key.x", "SECRET"])] == ["--api-key"]


def test_kv_transfer_config_is_refused_only_when_the_fleet_owns_it():
    args = ["--kv-transfer-config", '{"kv_connector":"X"}']
    assert refused_args(args) == []
    owned = ("--enable-prefix-caching", "--kv-transfer-config")
    (refused,) = refused_args(args, owned=owned)
    assert refused.option == "--kv-transfer-config" and "kv_cache=" in refused.reason
    assert [r.option for r in refused_args(["--kv_transfer_config.kv_role", "kv_both"], owned=owned)] == [
        "--kv-transfer-config"
    ]


@pytest.mark.parametrize(
    "args",
    [
        ["--max-model-len", "32768"],
        ["--max_model_len=32768"],
        ["--api-server-count", "2"],
        ["--hf-overrides", "{}"],
        ["--enable-prompt-tokens-details"],
        ["-O3"],
        ["--served-model-name", "api-key"],
        ["--", "x"],
    ],
)
def test_harmless_arguments_pass(args):
    assert refused_args(args) == []


def test_values_after_equals_are_never_shown():
    assert masked("--api_key=SECRET") == "--api_key=***"
    assert masked("--api-key") == "--api-key"
    assert option_name("SECRET") is None and option_name("-q") is None and option_name("--") is None
