"""The last step of every source: link what the resources name, decide which of them serve
inference, bound their replicas, count what was checked.

Templates (``sources/cfn.py``), live accounts (``sources/aws``) and tests call :func:`finish`
once a model holds everything they read. It lives here, not on :class:`~.model.Model`, so the
model stays plain data and never imports the serving verdicts built on it (no import cycle).
"""

from __future__ import annotations

from .model import Model
from .replicas import derive
from .serving import classify


def finish(model: Model) -> Model:
    """Link target groups to their load balancers, classify serving compute, derive every
    fleet's and target group's replica bound, count resources."""
    model.link()
    classify(model)
    derive(model)
    model.resources_checked = len({(r.type, r.id) for r in model.all_resources()})
    return model
