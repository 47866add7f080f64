"""Hostile templates for `lint` (issue #8): expansion bombs that are small on disk and huge
once intrinsics are resolved, plus big honest templates. Each is linted in a subprocess; the
script prints wall time and peak RSS, against the targets: a 1 MB bomb within 2 s, any template
up to 10 MB within 10 s and 500 MB.

    .venv/bin/python bench/hostile_inputs.py [--out DIR] [--only NAME]

The builders are imported by tests/test_hostile_lint.py (bounded time asserted there with
generous limits; the numbers are measured here).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

MB = 1 << 20
_TG = "AWS::ElasticLoadBalancingV2::TargetGroup"


def _tg(props: dict) -> dict:
    return {"Type": _TG, "Properties": dict({"Protocol": "HTTP", "Port": 80}, **props)}


def _sticky(value) -> dict:
    """A target group whose stickiness.enabled (read by the ALB rules) is ``value``."""
    return _tg({"TargetGroupAttributes": [{"Key": "stickiness.enabled", "Value": value}]})


def join_wide_delimiter() -> str:
    """Fn::Join with a 1 MB delimiter and 3000 items: 3 GB joined (was 3.1 GB of RSS)."""
    return json.dumps({"Resources": {"Tg": _sticky({"Fn::Join": ["d" * MB, ["x"] * 3000]})}})


def join_many_items() -> str:
    """Fn::Join of 200,000 items with a 4 KB delimiter (was MemoryError)."""
    return json.dumps({"Resources": {"Tg": _sticky({"Fn::Join": ["d" * 4096, ["x"] * 200_000]})}})


def find_in_map_fanout(items: int = 20_000, groups: int = 5000) -> str:
    """A 20,000-item mapping list referenced by 5000 target groups (was 81 s and 2 GB)."""
    lookup = {"Fn::FindInMap": ["M", "K", "L"]}
    resources = {f"Tg{i}": _tg({"TargetGroupAttributes": lookup}) for i in range(groups)}
    return json.dumps({"Mappings": {"M": {"K": {"L": ["v"] * items}}}, "Resources": resources})


def find_in_map_fanout_wide(items: int = 20_000, groups: int = 5000, tags: int = 60) -> str:
    """5,000 target groups each Fn::FindInMap a 20,000-item list, each also holding 60 plain tags:
    a template big enough (9.5 MB) that a budget growing with the template's size let 4M values
    be expanded (10.1 s on a quiet machine). The expansion budget is template-wide and fixed."""
    lookup = {"Fn::FindInMap": ["M", "K", "L"]}
    padding = [{"Key": f"k{j}", "Value": "v"} for j in range(tags)]
    resources = {f"Tg{i}": _tg({"TargetGroupAttributes": lookup, "Tags": padding}) for i in range(groups)}
    return json.dumps({"Mappings": {"M": {"K": {"L": ["v"] * items}}}, "Resources": resources})


def sub_repeated_variable() -> str:
    """Fn::Sub of 200,000 `${A}` with A a 256 KB text: 50 GB substituted."""
    return json.dumps({"Resources": {"Tg": _sticky({"Fn::Sub": ["${A}" * 200_000, {"A": "a" * (MB // 4)}]})}})


def split_into_pieces() -> str:
    """Fn::Select over Fn::Split of 1 MB of delimiters (a million pieces)."""
    return json.dumps({"Resources": {"Tg": _sticky({"Fn::Select": [0, {"Fn::Split": [",", "," * MB]}]})}})


def nested_join_aliases() -> str:
    """YAML: a 1 KB text aliased into a 1 MB Fn::Join, that join aliased 1000 times into another."""
    lines = [
        "Resources:",
        "  Tg:",
        f"    Type: {_TG}",
        "    Properties:",
        "      Protocol: HTTP",
        "      Name: &s " + "a" * 1024,
        "      VpcId: &j {'Fn::Join': ['', [" + ", ".join(["*s"] * 1000) + "]]}",
        "      TargetGroupAttributes:",
        "        - Key: stickiness.enabled",
        "          Value: {'Fn::Join': ['', [" + ", ".join(["*j"] * 1000) + "]]}",
    ]
    return "\n".join(lines) + "\n"


def alias_laughs(levels: int = 9) -> str:
    """YAML billion laughs: each level ten aliases of the previous (10**levels nodes)."""
    lines = [
        "Resources:",
        "  Tg:",
        f"    Type: {_TG}",
        "    Properties:",
        "      Protocol: HTTP",
        "      Tags:",
        "        - &l0 {Key: k, Value: v}",
    ]
    lines += [f"        - &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    lines += ["      TargetGroupAttributes:", "        - Key: stickiness.enabled", f"          Value: *l{levels}"]
    return "\n".join(lines) + "\n"


def many_target_groups(target_bytes: int = 10 * MB) -> str:
    """An honest template just under ``target_bytes``: sticky target groups, listeners, rules."""
    resources: dict = {}
    i, size = 0, 40
    while size < target_bytes - 2048:
        tg = _tg(
            {
                "TargetGroupAttributes": [
                    {"Key": "stickiness.enabled", "Value": "true"},
                    {"Key": "stickiness.type", "Value": "lb_cookie"},
                ],
                "Tags": [{"Key": "llm-affinity:role", "Value": "inference"}],
                "VpcId": "vpc-1",
            }
        )
        resources[f"Tg{i}"] = tg
        size += len(json.dumps(tg)) + len(f'"Tg{i}": , ')
        i += 1
    return json.dumps({"Resources": resources})


def yaml_many_nodes(target_bytes: int = 10 * MB) -> str:
    """10 MB of YAML that is one long list of short scalars (the most nodes per byte)."""
    head = ["Resources:", "  Tg:", f"    Type: {_TG}", "    Properties:", "      Protocol: HTTP", "      Metadata:"]
    body = "        - x\n" * ((target_bytes - 200) // len("        - x\n"))
    return "\n".join(head) + "\n" + body


def yaml_flow_mappings(target_bytes: int = 10 * MB) -> str:
    """10 MB of YAML list items that are small mappings (was ~900 MB composed)."""
    head = "Resources:\n  Tg:\n    Type: %s\n    Properties:\n      Protocol: HTTP\n      Tags:\n" % _TG
    line = "        - {a: {}}\n"
    return head + line * ((target_bytes - len(head)) // len(line))


def json_empty_lists(target_bytes: int = 10 * MB) -> str:
    """10 MB of JSON empty lists in one property (3.5 million values)."""
    count = (target_bytes - 200) // 3
    return json.dumps({"Resources": {"Tg": _tg({"Tags": []})}}).replace(
        '"Tags": []', '"Tags": [' + ",".join(["[]"] * count) + "]"
    )


def scenarios_everywhere(target_bytes: int = 10 * MB) -> str:
    """10 MB of target groups whose properties hang on four conditions (16 scenarios each)."""
    params = {f"P{i}": {"Type": "String", "AllowedValues": ["a", "b"], "Default": "a"} for i in range(4)}
    conditions = {f"C{i}": {"Fn::Equals": [{"Ref": f"P{i}"}, "a"]} for i in range(4)}
    resources: dict = {}
    size = 0
    while size < target_bytes - 100_000:
        tg = _tg(
            {
                "Protocol": {"Fn::If": ["C0", "HTTP", "HTTPS"]},
                "Port": {"Fn::If": ["C1", 80, 81]},
                "Name": {"Fn::If": ["C2", "a", "b"]},
                "VpcId": {"Fn::If": ["C3", "a", "b"]},
                "Tags": [{"Key": "k", "Value": {"Fn::Join": ["-", ["x" * 10] * 200]}}],
            }
        )
        resources[f"Tg{len(resources)}"] = tg
        size += len(json.dumps(tg)) + 12
    return json.dumps({"Parameters": params, "Conditions": conditions, "Resources": resources})


BOMBS: dict[str, tuple[str, Callable[[], str]]] = {
    "join-wide-delimiter": ("json", join_wide_delimiter),
    "join-many-items": ("json", join_many_items),
    "find-in-map-fanout": ("json", find_in_map_fanout),
    "sub-repeated-variable": ("json", sub_repeated_variable),
    "split-into-pieces": ("json", split_into_pieces),
    "nested-join-aliases": ("yaml", nested_join_aliases),
    "alias-laughs": ("yaml", alias_laughs),
}
BIG = {
    "10mb-target-groups": ("json", many_target_groups),
    "10mb-yaml-scalars": ("yaml", yaml_many_nodes),
    "10mb-yaml-mappings": ("yaml", yaml_flow_mappings),
    "10mb-json-lists": ("json", json_empty_lists),
    "10mb-scenarios": ("json", scenarios_everywhere),
    "10mb-find-in-map-fanout": ("json", find_in_map_fanout_wide),
}


def write(folder: Path, name: str, kind: str, build: Callable[[], str]) -> Path:
    path = folder / f"{name}.{kind}"
    path.write_text(build(), encoding="utf-8")
    return path


def lint_measured(path: Path, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float, float]:
    """(process, seconds, peak RSS in MB of the lint process): run alone, one at a time."""
    # VmHWM, not ru_maxrss: the latter keeps the high-water mark from before exec, so a child of
    # a big process (pytest after hundreds of tests) would report its parent's size.
    code = (
        "import resource, sys; from llm_affinity.cli import main; rc = main(sys.argv[1:]); "
        "hwm = [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')] "
        "if sys.platform == 'linux' else []; "
        "sys.stderr.write('\\nRSS_KB=%d\\n' % (hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)); "
        "sys.exit(rc)"
    )
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, "lint", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, NO_COLOR="1"),
    )
    elapsed = time.perf_counter() - start
    rss = next((int(line[7:]) for line in proc.stderr.splitlines() if line.startswith("RSS_KB=")), 0)
    return proc, elapsed, rss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="folder for the generated files (default: a temporary one)")
    parser.add_argument("--only", help="one case by name")
    args = parser.parse_args()
    folder = Path(args.out or tempfile.mkdtemp(prefix="hostile-"))
    folder.mkdir(parents=True, exist_ok=True)
    cases = {**{k: (v, 2.0) for k, v in BOMBS.items()}, **{k: (v, 10.0) for k, v in BIG.items()}}
    print(f"{'case':<24}{'size':>9}{'seconds':>9}{'peak MB':>9}  target  exit  unknown  errors")
    worst = 0
    for name, ((kind, build), target) in cases.items():
        if args.only and name != args.only:
            continue
        path = write(folder, name, kind, build)
        proc, seconds, rss = lint_measured(path)
        try:
            report = json.loads(proc.stdout)
            unknown, errors = len(report["unknown"]), len(report["errors"])
        except ValueError:
            unknown = errors = -1
        ok = seconds <= target and rss <= 500
        worst = worst or (0 if ok else 1)
        print(
            f"{name:<24}{path.stat().st_size / MB:>8.2f}M{seconds:>9.2f}{rss:>9.0f}  "
            f"{'ok' if ok else 'MISSED':<6}{proc.returncode:>6}{unknown:>9}{errors:>8}"
        )
    return worst


if __name__ == "__main__":
    sys.exit(main())
