"""What a finished build measured, read from its artifacts, and the ``checks`` evaluated on it.

Every family writes the contract fields of ``benchmark.json`` (``fps``, ``latency_ms``, ``models``
with per-model ``fps``, ``latency_ms`` and ``accuracy.cosine``) and ``quantize.json`` (``weight_bytes``).
A family's own figures (a chip count, ``offload.host_layers``, ...) are read where its
checks say (``Check.source``, ``accelbuild.families``), so metrics, checks and ``compare`` name no
family. The one figure over several models is the family's combined figure, named by its ``fps_is``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbuild.families import all_checks


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
        figures = entry.get("accuracy") or {}
        model: dict[str, Any] = {"name": name, "fps": entry.get("fps"), "latency_ms": entry.get("latency_ms"),
                                 "cosine": figures.get("cosine"), "worst_file": figures.get("worst_file"),
                                 "worst_cosine": figures.get("worst_cosine"),
                                 "cosine_measured_on": figures.get("measured_on"),
                                 "no_signal_frames": figures.get("no_signal_frames")}
        if figures.get("headline") == "pooled":  # small outputs: the cosine pools the frames, no frame's own
            model["cosine_pooled_over"] = figures.get("pooled_over")
        if figures.get("worst_output"):  # a model with several outputs: the one its cosine is
            model["worst_output"] = figures["worst_output"]
        whole = entry.get("end_to_end")
        if isinstance(whole, dict):  # the model with its host sections: accelerator kind + host machine
            model.update(end_to_end_fps=whole.get("fps"), end_to_end_latency_ms=whole.get("latency_ms"),
                         end_to_end_accelerator=whole.get("accelerator"),
                         end_to_end_host=whole.get("host_measured_on"),
                         end_to_end_fps_spread=whole.get("fps_spread"),
                         end_to_end_latency_ms_spread=whole.get("latency_ms_spread"))
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
        "fps_is": bench.get("fps_is") or ("frames per second of the model" if len(models) == 1 else
                                          "a combined figure of several models"),
        "latency_ms": max(latencies) if latencies else bench.get("latency_ms"),
        "min_cosine": min(cosines) if cosines else None,
        # None when a model's quantize.json is elsewhere (a matrix variant folder that shared the task)
        "weight_bytes": sum(m["weight_bytes"] for m in models)
        if all(isinstance(m.get("weight_bytes"), int) for m in models) else None,
        "models": models,
        "simulated": bool(bench.get("simulated")),
    }
    for check in all_checks().values():  # the families' own figures, where their builds record them
        if check.source is not None and check.metric not in metrics:
            found, value = _at(bench, check.source)
            if found:
                metrics[check.metric] = value
    if "estimated_by" in bench:
        metrics["estimated_by"] = bench["estimated_by"]
    if "measured_on" in bench:
        metrics["measured_on"] = bench["measured_on"]
    metrics["kind"] = kind(bench)
    trust = bench.get("credibility")
    if isinstance(trust, dict) and trust.get("calibrated"):
        metrics["band_pct"] = trust.get("band_pct")
        if trust.get("fps_bound"):  # every published point on one side of the model
            metrics["fps_bound"] = trust["fps_bound"]
            metrics["band_text"] = trust.get("text")
    return metrics


def _at(record: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    """(found, value) at a dotted path of a JSON record: (False, None) when its first key is missing or a
    section on the way is not a mapping; (True, None) when only the last key is (a figure not measured)."""
    parts = dotted.split(".")
    value: Any = record
    for i, part in enumerate(parts):
        if not isinstance(value, dict) or (part not in value and i == 0):
            return False, None
        value = value.get(part)
    return True, value


def kind(bench: dict[str, Any]) -> str:
    """How a build's figures were obtained: "measured" (on a real machine), "estimated by <tool>" (a vendor
    compiler's estimate), "simulated" (a modelled accelerator), or "no timing: <why>" (a build whose speed needs
    a device: its accuracy is emulated by the vendor's tool, ``emulated_by``)."""
    if bench.get("measured"):
        return "measured"
    if bench.get("estimated_by"):
        return f"estimated by {bench['estimated_by']}"
    if bench.get("fps") is None and bench.get("timing"):
        return f"no timing: {bench['timing']}" + (f"; accuracy emulated by {bench['emulated_by']}"
                                                   if bench.get("emulated_by") else "")
    return "simulated"


def evaluate(checks: dict[str, float], metrics: dict[str, Any]) -> list[CheckResult]:
    known = all_checks()
    results = []
    for name, required in checks.items():
        check = known[name]
        measured = metrics.get(check.metric)
        if not isinstance(measured, (int, float)):
            results.append(CheckResult(name, required, None, False))
            continue
        results.append(CheckResult(name, required, measured, check.passes(required, measured)))
    return results


def check_table(pipeline: str, results: list[CheckResult]) -> str:
    """The table a failed check prints: check, required, measured, verdict."""
    rows = [("check", "required", "measured", "")]
    for r in results:
        sign = ">=" if all_checks()[r.name].direction == "min" else "<="
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


def headline_said(model: dict[str, Any]) -> str:
    """Which frames a model's headline cosine comes from: ``on its worst held-out frame, b.png`` or ``pooled
    over 6 calibration frames (worst frame b.png at 0.961059)``."""
    on = model.get("cosine_measured_on")
    if model.get("cosine_pooled_over") is not None:
        return (f"pooled over {model['cosine_pooled_over']} {on} frames (worst frame {model.get('worst_file')} "
                f"at {model.get('worst_cosine')})")
    return f"on its worst {on} frame, {model.get('worst_file')}"


def accuracy_warnings(pipeline: str, figures: dict[str, Any] | None, floor: float,
                      artifacts: dict[str, Path]) -> list[str]:
    """One line per model whose output cosine against float is below ``floor`` (benchmark.accuracy.warn_below),
    naming its weakest layer (lowest weight SQNR in quantize.json) where the record has layers."""
    lines = []
    for model in (figures or {}).get("models", []):
        cosine = model.get("cosine")
        if not isinstance(cosine, (int, float)) or cosine >= floor:
            continue
        line = f"{pipeline}: {model['name']}: output cosine {cosine:.6g} against float is below {floor:g} " \
               f"(benchmark.accuracy.warn_below)"
        if model.get("worst_file"):
            line += " " + headline_said(model)
        if model.get("worst_output"):
            line += f", output {model['worst_output']}"
        weakest = _weakest_layer(artifacts.get(f"{model['name']}/quantize.json"))
        if weakest:
            line += f"; weakest layer {weakest[0]} ({weakest[1]:.1f} dB weight SQNR in quantize.json)"
        lines.append(line)
    return lines


def _weakest_layer(record: Path | None) -> tuple[str, float] | None:
    try:
        layers = json.loads(record.read_text()).get("layers", []) if record else []
    except (OSError, ValueError):
        return None
    scored = [(layer["name"], layer["sqnr_db"]) for layer in layers
              if isinstance(layer.get("sqnr_db"), (int, float)) and "name" in layer]
    return min(scored, key=lambda item: item[1]) if scored else None
