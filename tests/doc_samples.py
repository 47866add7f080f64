"""Output samples in README.md and docs/*.md, and how the tests compare them with a real run.

A sample is a ```console block whose first line is ``$ COMMAND``; the lines after it are what
the command prints (standard output, then standard error), line for line: a line ``…`` alone
stands for any number of lines, a line ending in ``…`` for any rest of that line; nothing else
may differ. An HTML comment on the line before
the fence (invisible on the rendered page) says what the command needs:

    <!-- sample: exit=1 -->                    its exit code (default 0)
    <!-- sample: lab=lb_cookie -->             probe: the test lab (tests/lab: three stub engines
                                               behind an emulated ALB; lb_cookie, app_cookie or
                                               round_robin), reached at http://127.0.0.1:8000;
                                               other keys are engine options (served_by=false)
    <!-- sample: moto=seed_k8s -->             audit: a moto account seeded by that function of
                                               tests/audit_fixtures.py

``$ llm-affinity …`` runs the CLI in-process from the repository root
(tests/test_doc_samples.py); ``$ make run`` is checked against the reference stacks synthesized
as app.py synthesizes them: the per-stack table and the lint of the cloud assembly
(tests/test_stacks.py, marked cdk).

What varies from run to run is normalised, in the doc and in the output alike, so the doc shows
a real run and the rest must be equal: the lab's port (the doc says 8000), the TTFT columns of
probe's per-turn table (timings of the stub engines), moto's random ARN suffixes, and the
temporary cloud assembly's path (the doc says cdk.out).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

CONSOLE = re.compile(r"^( *)```console\n(.*?)^\1```", re.S | re.M)
OPTIONS = re.compile(r"<!--\s*sample:\s*(.*?)\s*-->\s*$")
SKIP = "…"

#: where a lab sample's command says the lab is (replaced by the lab's real address)
LAB_URL = "http://127.0.0.1:8000"
_PORT = re.compile(r"http://127\.0\.0\.1:\d+")
#: probe's per-turn rows: turn, requests, prompt tok, cached tok, hit rate, then two TTFT timings
_PROBE_TTFT = re.compile(r"^(\s*\d+\s+\d+\s+\S+\s+\S+\s+\S+)\s+[\d.]+\s+[\d.]+$")
#: moto's random ids at the end of an ELBv2 ARN (targetgroup/NAME/ID, loadbalancer/app/NAME/ID)
_ARN_ID = re.compile(r"(arn:aws:elasticloadbalancing:[^\s/]+:\d+:(?:targetgroup|loadbalancer/\w+)/[\w-]+/)[0-9a-f]{16}")


@dataclass(frozen=True)
class Sample:
    doc: Path
    line: int
    command: str
    expected: list[str]
    options: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    @property
    def exit_code(self) -> int:
        return int(self.options.get("exit", "0"))


def samples(docs: list[Path] | None = None) -> list[Sample]:
    found = []
    for doc in docs or DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in CONSOLE.finditer(text):
            lines = textwrap.dedent(match.group(2)).splitlines()
            line = text.count("\n", 0, match.start()) + 1
            assert lines and lines[0].startswith("$ "), f"{doc.name}:{line}: a console block starts with `$ COMMAND`"
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = OPTIONS.search(before)
            options = dict(item.split("=", 1) for item in marker.group(1).split()) if marker else {}
            found.append(Sample(doc, line, lines[0][2:], lines[1:], options))
    return found


def normalise(lines: list[str], *, outdir: Path | None = None) -> list[str]:
    out = []
    for line in lines:
        line = _PORT.sub(LAB_URL, line)
        line = _PROBE_TTFT.sub(r"\1  (ttft)", line)
        line = _ARN_ID.sub(r"\1(id)", line)
        if outdir is not None:
            line = line.replace(str(outdir), "cdk.out")
        out.append(line)
    return out


def _pattern(expected: list[str]) -> re.Pattern[str]:
    parts = []
    for want in expected:
        if want == SKIP:
            parts.append(r"(?:.*\n)*?")
        elif want.endswith(SKIP):
            parts.append(re.escape(want[: -len(SKIP)]) + r".*\n")
        else:
            parts.append(re.escape(want) + r"\n")
    return re.compile("".join(parts))


def first_missing(expected: list[str], actual: list[str]) -> str | None:
    """The first expected line the output does not have in this order (None: all found)."""
    at = 0
    for want in expected:
        if want == SKIP:
            continue
        prefix = want[: -len(SKIP)] if want.endswith(SKIP) else None
        while at < len(actual) and not (actual[at].startswith(prefix) if prefix is not None else actual[at] == want):
            at += 1
        if at == len(actual):
            return want
        at += 1
    return None


def check(sample: Sample, output: str, *, outdir: Path | None = None) -> None:
    """The output equals the sample: line for line, where ``…`` alone is any number of lines
    and a trailing ``…`` any rest of the line."""
    expected = normalise(sample.expected, outdir=outdir)
    actual = normalise(output.splitlines(), outdir=outdir)
    if _pattern(expected).fullmatch("".join(line + "\n" for line in actual)):
        return
    missing = first_missing(expected, actual)
    why = f"does not print (in this order) {missing!r}" if missing else "prints lines the sample leaves out (use …)"
    raise AssertionError(f"{sample.name}: `{sample.command}` {why}; it printed:\n" + "\n".join(actual))
