"""The cost model against the simulation of the same program, per model: ratios, what binds each side
and, where they part by more than the bands (steady-state FPS within 10%, latency within 20%), the effect
that separates them, in words for benchmark.json, the report and the terminal."""

from __future__ import annotations

from typing import Any

from accelbuild.targets.mx3.mapper.view import describe

FPS_BAND = 0.10
LATENCY_BAND = 0.20
IDENTITY = ("kind", "layer", "model", "direction", "from_chip")  # what names a resource (not how busy it is)


def same_resource(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a.get(key) == b.get(key) for key in IDENTITY)


def compare(model: str, predicted: dict[str, Any], fps: float, latency_ms: float, first_latency_ms: float,
            binding: dict[str, Any]) -> dict[str, Any]:
    """One model's figures side by side, whether they agree, and the effects that separate them."""
    fps_ratio = fps / predicted["fps"] if predicted.get("fps") else None
    latency_ratio = latency_ms / predicted["latency_ms"] if predicted.get("latency_ms") else None
    bottleneck = predicted.get("bottleneck") or {}
    effects = []
    if fps_ratio is not None and abs(fps_ratio - 1) > FPS_BAND:
        effects.append(_throughput_effect(binding, bottleneck))
    if latency_ratio is not None and abs(latency_ratio - 1) > LATENCY_BAND:
        effects.append(_latency_effect(latency_ms, first_latency_ms, latency_ratio))
    return {
        "model": model,
        "cost_model": {"fps": predicted.get("fps"), "latency_ms": predicted.get("latency_ms"), "bottleneck": bottleneck},
        "simulated": {"fps": round(fps, 2), "latency_ms": round(latency_ms, 4), "binding": binding},
        "fps_ratio": None if fps_ratio is None else round(fps_ratio, 4),
        "latency_ratio": None if latency_ratio is None else round(latency_ratio, 4),
        "same_binding": same_resource(binding, bottleneck),
        "agree": not effects,
        "effects": effects,
    }


def _throughput_effect(binding: dict[str, Any], bottleneck: dict[str, Any]) -> str:
    if binding.get("kind") == "stalls":
        return f"the simulated frames wait between layers (back-pressure through row buffers): {describe(binding)}"
    if not same_resource(binding, bottleneck):
        return f"the simulator is bound by {describe(binding)}; the cost model by {describe(bottleneck)}"
    return f"contention and host-transfer jitter at {describe(binding)}, which the cost model averages out"


def _latency_effect(latency_ms: float, first_latency_ms: float, ratio: float) -> str:
    if latency_ms > (1 + LATENCY_BAND) * first_latency_ms:
        return (f"frames wait in buffers in the steady state: {latency_ms:.3f} ms against {first_latency_ms:.3f} ms "
                "for the first frame through the empty pipeline")
    longer = "longer" if ratio > 1 else "shorter"
    return f"the rows each layer waits for (pipeline fill) take {longer} than the cost model's path"


def summary_line(entry: dict[str, Any]) -> str:
    """One model's comparison for the terminal."""
    simulated, cost = entry["simulated"], entry["cost_model"]
    text = (f"{entry['model']}: {simulated['fps']:,.1f} FPS simulated (x{entry['fps_ratio'] or 0:.2f} of the cost "
            f"model's {cost['fps'] or 0:,.1f}), bound by {describe(simulated['binding'])}")
    return text if entry["agree"] else text + "; " + "; ".join(entry["effects"])
