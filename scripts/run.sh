#!/usr/bin/env bash
# The main job: lint the example templates (the good one must be clean; the broken one shows
# every failure mode it has), then synthesize the reference stacks through both synth-time
# gates, print per stack what each gate proved (VERBOSE=1: every acknowledgement with its
# reason) and lint the cloud assembly. Run through `make run`, which prepared .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin

echo "== llm-affinity lint examples/good (must be clean at warning and above)"
"$BIN/llm-affinity" lint examples/good

echo
echo "== llm-affinity lint examples/broken (a fleet with the failure modes of docs/rules.md; findings expected)"
"$BIN/llm-affinity" lint examples/broken --fail-on never

echo
echo "== cdk synth of the reference stacks (cdk-nag AwsSolutions + llm-affinity gate; no AWS account needed)"
rm -rf cdk.out  # never report on a previous run's assembly
synth=0
"$BIN/python" app.py || synth=$?
if [ -f cdk.out/manifest.json ]; then
  echo
  echo "== what the gates proved, per stack (cdk.out/validation-report.json + manifest.json)"
  "$BIN/python" -m llm_affinity.checks.synth_report cdk.out ${VERBOSE:+--verbose}
fi
[ "$synth" -eq 0 ] || exit "$synth"

echo
echo "== llm-affinity lint cdk.out (must be clean at warning and above)"
"$BIN/llm-affinity" lint cdk.out
