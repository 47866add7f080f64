"""Which `vllm_args` a fleet refuses, judged the way vLLM itself reads its command line.

Why not a plain string comparison: `vllm serve` parses with `FlexibleArgumentParser`
(vllm/utils/argparse_utils.py, earlier vllm/utils/__init__.py), a standard `argparse` parser
that first rewrites every argument starting with `--`: the text before `=` is the option, and
in it `_` becomes `-` up to the first `.` (`--api_key=X` is `--api-key=X`; `--json-arg.key v`
sets a key of the JSON option `--json-arg`). The parser keeps argparse's default
`allow_abbrev=True`, so an unambiguous prefix names the whole option (`--api-k X` is
`--api-key X`). A guard that compared literal strings was bypassed by all three.

So an argument names option O when, after that rewriting and after dropping a `.key` suffix,
it is O or a prefix of O. A prefix shared with another option is ambiguous and vLLM refuses to
start; refusing it here too only moves that failure to synth time.

Pure Python (no aws_cdk), so the unit tests need no CDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

#: options a fleet never passes through `vllm_args`, with the reason and the way to do it instead
FORBIDDEN_OPTIONS = {
    "--api-key": (
        "it would put the key into user data; pass api_key_secret=<Secrets Manager secret> (or a front's "
        "api_key=) instead: the key is then read on the host at boot"
    ),
    "--hf-token": (
        "a token on the command line sits in user data; pass hf_token_secret=<Secrets Manager secret> "
        "instead: the token is then read on the host at boot"
    ),
    "--no-enable-prefix-caching": "it turns prefix caching off (stickiness buys nothing without it)",
}
#: options the fleet writes itself; a second value given in `vllm_args` would conflict with it
OWNED_OPTIONS = {
    "--enable-prefix-caching": (
        "the fleet writes --enable-prefix-caching itself; the flag takes no value (prefix caching stays on)"
    ),
    "--kv-transfer-config": "the fleet writes --kv-transfer-config itself when kv_cache= is given",
}


@dataclass(frozen=True)
class RefusedArg:
    """One refused argument: its position, how it may be shown (a value after `=` is masked: it
    may be a secret) and why."""

    index: int
    shown: str
    option: str
    reason: str


def option_name(arg: str) -> str | None:
    """The option `arg` names as vLLM's parser reads it (`--api_key=x` -> `--api-key`,
    `--kv_transfer_config.kv_role` -> `--kv-transfer-config`), or None for a value or a
    single-dash short option."""
    if not isinstance(arg, str) or not arg.startswith("--") or arg == "--":
        return None
    key = arg.split("=", 1)[0].split(".", 1)[0]
    return "--" + key[2:].replace("_", "-")


def masked(arg: str) -> str:
    """`arg` with anything after `=` hidden (`--api_key=SECRET` -> `--api_key=***`)."""
    return arg.split("=", 1)[0] + "=***" if "=" in arg else arg


def _names(name: str, option: str) -> bool:
    """True when `name` selects `option`: equal, or a prefix argparse may expand to it."""
    return len(name) > 2 and option.startswith(name)


def _reason(arg: str, name: str, owned: Sequence[str]) -> tuple[str, str] | None:
    for option, reason in FORBIDDEN_OPTIONS.items():
        if _names(name, option):
            return option, reason
    for option in owned:
        carries_value = "=" in arg or "." in arg.split("=", 1)[0]
        if _names(name, option) and (option != "--enable-prefix-caching" or carries_value):
            return option, OWNED_OPTIONS[option]
    return None


def refused_args(args: Sequence[str], *, owned: Sequence[str] = ("--enable-prefix-caching",)) -> list[RefusedArg]:
    """Every argument of `args` that names a forbidden option, or one the fleet writes itself
    (`owned`; a bare `--enable-prefix-caching` only repeats what the fleet writes and passes)."""
    out = []
    for i, arg in enumerate(args):
        name = option_name(arg)
        found = _reason(arg, name, owned) if name is not None else None
        if found is not None:
            out.append(RefusedArg(i, masked(arg), *found))
    return out
