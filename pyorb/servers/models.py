"""Server models by name: the papers' names and pyorb's strategy specs.

A model is a servant style plus a dispatch strategy (plus, for AMH-n, a
number of worker processes).  ``--model`` accepts the papers' names or any
strategy spec from :mod:`pyorb.server.strategies`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyorb.server import strategies

ALIASES = {
    # AMH paper (Deshpande et al.) names
    "amh-st": "amh",
    "tpr-st": "reactive",
    "tpc": "thread_per_connection",
    # ORBacus / Harkema et al. names
    "thread-per-client": "thread_per_connection",
    "thread-per-request": "thread_per_request",
    "thread-pool": "thread_pool(8)",
}
"""Model names of the papers; ``tpr-N`` is ``thread_pool(N)`` and ``amh-N`` is AMH on N processes."""


@dataclass(frozen=True)
class Model:
    name: str
    style: str  # "amh", "coroutine" or "sync"
    strategy: str
    workers: int = 1


def resolve_model(text: str, workers: int = 1) -> Model:
    """The model called ``text``; ValueError (one line) if there is none."""
    name = text.strip().lower()
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    if name.startswith("tpr-") and name[4:].isdigit():
        spec = f"thread_pool({int(name[4:])})"
    elif name.startswith("amh-") and name[4:].isdigit():
        spec, workers = "amh", int(name[4:])
        if workers < 1:
            raise ValueError(f"model {text!r}: the number of processes must be at least 1")
    elif name == "coroutine":
        return Model(name, "coroutine", "amh", workers)
    else:
        spec = ALIASES.get(name, text.strip())
    try:
        strategy = strategies.create(spec)
    except ValueError as exc:
        if "(" in spec:
            raise
        raise ValueError(f"unknown model {text!r}; known: {model_names()}") from exc
    style = "amh" if spec == "amh" else "sync"
    strategy.close()
    return Model(name, style, strategy.name, workers)


def model_names() -> str:
    return ", ".join([*ALIASES, "tpr-N", "amh-N", "coroutine", *strategies.names()])
