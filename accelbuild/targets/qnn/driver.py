"""onnxruntime-qnn's side of the build: runs in the qnn toolchain's interpreter (accelbuild/toolchains).

Standard library, numpy and onnxruntime-qnn only; accelbuild is not importable here. Two actions:

- ``compile``: open a session on the QDQ model with the QNN execution provider's HTP backend and EP context
  enabled, which makes the HTP compile the model for the SoC and write the context model (EPContext nodes)
  and its context binary; the provider's op trace says which nodes went to the HTP;
- ``emulate``: open a session on the context model (the HTP emulated on x86) and run every frame.
"""

import os

import numpy as np
import onnxruntime as ort
import onnxruntime_qnn
from toolchain_runtime import Refusal

EP = "QNNExecutionProvider"


def _devices():
    ort.register_execution_provider_library(EP, onnxruntime_qnn.get_library_path())
    return [d for d in ort.get_ep_devices() if d.ep_name == EP]


def _options(request, extra=None):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    settings = {"backend_path": onnxruntime_qnn.get_qnn_htp_path(), "soc_model": str(request["soc_model"])}
    settings.update(extra or {})
    options.add_provider_for_devices(_devices(), settings)
    return options


def compile_model(request):
    options = _options(request, {"htp_graph_finalization_optimization_mode": "3", "enable_framework_op_trace": "1",
                                 "framework_op_trace_dir": request["trace_dir"]})
    options.add_session_config_entry("ep.context_enable", "1")
    options.add_session_config_entry("ep.context_file_path", request["context"])
    options.add_session_config_entry("ep.context_embed_mode", "0")
    try:
        ort.InferenceSession(request["model"], options)
    except Exception as error:  # the provider's own message: the HTP compiler refused the graph
        raise Refusal(str(error).strip()) from None
    if not os.path.exists(request["context"]):
        raise Refusal("the QNN execution provider took no node of the model, so it wrote no context binary")
    return {"onnxruntime": ort.__version__}


def emulate(request):
    try:
        session = ort.InferenceSession(request["context"], _options(request))
    except Exception as error:
        raise Refusal(str(error).strip()) from None
    names = [i.name for i in session.get_inputs()]
    paths = []
    for i, frame in enumerate(request["frames"]):
        feeds = {name: np.load(path) for name, path in zip(names, frame)}
        outputs = session.run(None, feeds)
        path = os.path.join(request["outputs"], f"frame_{i:05d}.npz")
        np.savez(path, *[np.asarray(o) for o in outputs])
        paths.append(path)
    return {"outputs": paths}


ACTIONS = {"compile": compile_model, "emulate": emulate}
