"""onnxruntime session options: chosen by the map stage, recorded in ``<model>/session.json``, and
rebuilt from that record by every later stage (and by anyone deploying ``model.ort``)."""

from __future__ import annotations

from typing import Any

LEVELS = {"basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}
PROVIDERS = ("CPUExecutionProvider",)


def choose(precision: str, threads: int | None, level: str, onnxruntime_version: str) -> dict[str, Any]:
    """The session config of a model (what session.json holds)."""
    notes = ["execution_mode ORT_SEQUENTIAL: one frame at a time, intra-op threads parallelise each operator; "
             "ORT_PARALLEL only helps graphs with wide independent branches and adds an inter-op thread pool"]
    if threads is None:
        notes.append("intra_op_num_threads 0: onnxruntime's default, one thread per physical core")
    if level == "all":
        notes.append("graph_optimization all: layout optimizations (NCHWc blocks of this CPU's vector width) "
                     "are stored in model.ort, so it suits CPUs with the same vector width only; onnxruntime "
                     "numbers the ReorderOutput nodes it adds in hash-map order, so model.ort's bytes can differ "
                     "between builds (extended is portable and byte-identical)")
    if precision == "int8" and level == "basic":
        notes.append("graph_optimization basic keeps QuantizeLinear/DequantizeLinear as separate operators: the "
                     "integer kernels (QLinearConv, MatMulIntegerToFloat, ...) come from the extended level")
    return {
        "onnxruntime": onnxruntime_version,
        "model": "model.ort",
        "precision": precision,
        "providers": list(PROVIDERS),
        "graph_optimization": level,
        "graph_optimization_level": LEVELS[level],
        "execution_mode": "ORT_SEQUENTIAL",
        "intra_op_num_threads": threads or 0,
        "inter_op_num_threads": 1,
        "config_entries": {"session.load_model_format": "ORT"},
        "notes": notes,
    }


def options(config: dict[str, Any], *, threads: int | None = None, for_saving: bool = False) -> Any:
    """The ``SessionOptions`` of ``config`` (``threads``: override the thread count, e.g. 1 for checks).
    ``for_saving``: the options that optimize an ONNX model (not the ORT-format load)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3  # the NCHWc "hardware specific" warning is recorded in ort.json instead
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, config["graph_optimization_level"])
    so.execution_mode = getattr(ort.ExecutionMode, config["execution_mode"])
    so.intra_op_num_threads = config["intra_op_num_threads"] if threads is None else threads
    so.inter_op_num_threads = config["inter_op_num_threads"]
    for key, value in config["config_entries"].items():
        if not (for_saving and key == "session.load_model_format"):
            so.add_session_config_entry(key, value)
    return so


def load(model: bytes, config: dict[str, Any], *, threads: int | None = None) -> Any:
    """An onnxruntime session of ``model.ort``'s bytes with the recorded options."""
    import onnxruntime as ort

    return ort.InferenceSession(model, options(config, threads=threads), providers=list(config["providers"]))
