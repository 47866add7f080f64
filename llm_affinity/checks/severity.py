"""Severities, defined once: their order, how they rank against ``--fail-on``, and how SARIF
spells them. Tiny and dependency-free so the CLI can import it at start-up."""

from __future__ import annotations

#: Most severe first.
SEVERITIES = ("error", "warning", "info")
#: error 3, warning 2, info 1: a finding fails a run when its rank >= the --fail-on rank.
SEVERITY_RANK = {name: len(SEVERITIES) - n for n, name in enumerate(SEVERITIES)}
#: ``--fail-on`` choices: a severity, or ``never``.
FAIL_ON = {**SEVERITY_RANK, "never": len(SEVERITIES) + 1}
#: SARIF result levels and GitHub code scanning's security-severity scores.
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
SECURITY_SEVERITY = {"error": "7.0", "warning": "4.0", "info": "1.0"}
