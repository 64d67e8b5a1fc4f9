"""What a finished build measured, read from its artifacts, and the ``checks`` evaluated on it.

Every family writes the contract fields of ``benchmark.json`` (``fps``, ``latency_ms``, ``models``
with per-model ``fps``, ``latency_ms`` and ``accuracy.cosine``; ``num_chips`` where the family has chips,
``offload.host_layers`` where it offloads) and ``quantize.json`` (``weight_bytes``), so metrics, checks
and ``compare`` need nothing family-specific. Totals over several models are labelled as sums of
different models' frames, never one model's rate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# check name -> (metric it reads, "min" or "max", what the metric is)
CHECKS: dict[str, tuple[str, str, str]] = {
    "min_fps": ("fps", "min", "frames per second (sum over models)"),
    "max_latency_ms": ("latency_ms", "max", "latency of the slowest model, ms"),
    "min_cosine": ("min_cosine", "min", "output cosine vs float, worst model"),
    "max_chips": ("num_chips", "max", "chips used"),
    "max_host_layers": ("host_layers", "max", "layers left to the host"),
}


@dataclass(frozen=True)
class CheckResult:
    name: str
    required: float
    measured: float | None  # None: the build has no such figure
    ok: bool

    def as_json(self) -> dict[str, Any]:
        return {"check": self.name, "required": self.required, "measured": self.measured, "ok": self.ok}


def read_metrics(benchmark: Path, quantize_records: dict[str, Path]) -> dict[str, Any] | None:
    """The figures of one build (None when it has no benchmark.json yet)."""
    try:
        bench = json.loads(benchmark.read_text())
    except (OSError, ValueError):
        return None
    models = []
    for entry in bench.get("models", []):
        name = entry.get("name")
        model: dict[str, Any] = {"name": name, "fps": entry.get("fps"), "latency_ms": entry.get("latency_ms"),
                                 "cosine": (entry.get("accuracy") or {}).get("cosine")}
        record = quantize_records.get(name)
        if record is not None:
            try:
                model["weight_bytes"] = json.loads(record.read_text()).get("weight_bytes")
            except (OSError, ValueError):
                model["weight_bytes"] = None
        models.append(model)
    cosines = [m["cosine"] for m in models if isinstance(m["cosine"], (int, float))]
    latencies = [m["latency_ms"] for m in models if isinstance(m["latency_ms"], (int, float))]
    metrics: dict[str, Any] = {
        "fps": bench.get("fps"),
        "fps_is": "a sum over models" if len(models) > 1 else "one model's rate",
        "latency_ms": max(latencies) if latencies else bench.get("latency_ms"),
        "min_cosine": min(cosines) if cosines else None,
        # None when a model's quantize.json is elsewhere (a matrix variant folder that shared the task)
        "weight_bytes": sum(m["weight_bytes"] for m in models)
        if all(isinstance(m.get("weight_bytes"), int) for m in models) else None,
        "models": models,
        "simulated": bool(bench.get("simulated")),
    }
    if "num_chips" in bench:
        metrics["num_chips"] = bench["num_chips"]
    if isinstance(bench.get("offload"), dict):
        metrics["host_layers"] = bench["offload"].get("host_layers")
    if "estimated_by" in bench:
        metrics["estimated_by"] = bench["estimated_by"]
    if "measured_on" in bench:
        metrics["measured_on"] = bench["measured_on"]
    metrics["kind"] = kind(bench)
    return metrics


def kind(bench: dict[str, Any]) -> str:
    """How a build's figures were obtained: "measured" (on a real machine), "estimated by <tool>" (a vendor
    compiler's estimate), or "simulated" (a modelled accelerator)."""
    if bench.get("measured"):
        return "measured"
    if bench.get("estimated_by"):
        return f"estimated by {bench['estimated_by']}"
    return "simulated"


def evaluate(checks: dict[str, float], metrics: dict[str, Any]) -> list[CheckResult]:
    results = []
    for name, required in checks.items():
        key, sense, _ = CHECKS[name]
        measured = metrics.get(key)
        if not isinstance(measured, (int, float)):
            results.append(CheckResult(name, required, None, False))
            continue
        ok = measured >= required if sense == "min" else measured <= required
        results.append(CheckResult(name, required, measured, ok))
    return results


def check_table(pipeline: str, results: list[CheckResult]) -> str:
    """The table a failed check prints: check, required, measured, verdict."""
    rows = [("check", "required", "measured", "")]
    for r in results:
        sign = ">=" if CHECKS[r.name][1] == "min" else "<="
        measured = "n/a" if r.measured is None else number(r.measured)
        rows.append((r.name, f"{sign} {number(r.required)}", measured, "ok" if r.ok else "FAILED"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [f"{pipeline}: checks"]
    lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def number(value: float) -> str:
    """A figure for a table: thousands separated, a few significant digits below 100."""
    if abs(value) >= 100:
        return f"{value:,.1f}".removesuffix(".0")
    return f"{value:.4g}"
