"""How a profile fares against the published figures it lists (``calibration:``): predicted and simulated.

Each point's network is generated with random weights (``accelbuild.testing.models``; a random-weight
network times like a trained one), partitioned, scheduled at the point's batch size (effort normal,
compile_mode latency) and simulated; ``latency_ms`` points compare one batch alone, ``fps`` points the
steady state with frames in flight. A point measured by a setup of its own (``setup``, ``call_us``) is
priced with that setup's host time per call, as docs/credibility.md prices it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from accelbuild.targets.npu.hardware import CalibrationPoint, NpuHardware
from accelbuild.targets.npu.partition import Offload, partition
from accelbuild.targets.npu.schedule import schedule
from accelbuild.targets.npu.timeline import Timeline, simulate


@dataclass(frozen=True)
class CalibrationResult:
    point: CalibrationPoint
    predicted: float   # the cost model's figure
    simulated: float   # the timeline simulator's figure
    timeline: Timeline

    @property
    def predicted_error(self) -> float:
        """Relative: +0.10 is 10% above the published figure."""
        return self.predicted / self.point.value - 1

    @property
    def simulated_error(self) -> float:
        return self.simulated / self.point.value - 1


def evaluate(hw: NpuHardware, point: CalibrationPoint) -> CalibrationResult:
    from accelbuild.testing import models

    if point.call_us is not None:
        hw = replace(hw, crossing=replace(hw.crossing, call_us=point.call_us))
    model = getattr(models, point.model)(size=point.input_size)
    part = partition(model, hw, Offload())
    schedules = {s.id: schedule(s.model, hw, batch_size=point.batch_size) for s in part.npu_subgraphs}
    timeline = simulate(part, schedules, hw, model=model)
    if point.metric == "fps":
        return CalibrationResult(point, timeline.cost_model_fps, timeline.fps, timeline)
    return CalibrationResult(point, timeline.cost_model_latency_ms, timeline.latency_ms, timeline)


def evaluate_all(hw: NpuHardware) -> list[CalibrationResult]:
    return [evaluate(hw, point) for point in hw.calibration]
