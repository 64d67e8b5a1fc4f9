"""The ONNX import stage: input shapes by layout, shape inference, clear errors for bad models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from accelbuild.testing import models

from conftest import run_cli, write


def _import(project: Path, model_line: str, shapes: str = "auto", expect: int = 0):
    write(project / "p.yaml", f"accelbuild: 1\nname: p\nmodels:\n  - name: m\n    path: {model_line}\n"
                              f"    input_shapes: {shapes}\n")
    result = run_cli("run", "p.yaml", "--state-dir", "s", cwd=project)
    assert result.code == expect, result.stderr
    assert "Traceback" not in result.stderr
    return result


def _record(project: Path) -> dict:
    return json.loads((project / "build/p/m/import.json").read_text())


def _imported(project: Path) -> onnx.ModelProto:
    return onnx.load(project / "build/p/m/imported.onnx")


def test_nchw_image_input_gets_channel_last_shape(project: Path) -> None:
    _import(project, "models/tinydet.onnx", "{images: [96, 128, 3]}")
    record = _record(project)
    assert record["inputs"] == [{"name": "images", "shape": [1, 3, 96, 128], "layout": "NCHW"}]
    assert record["outputs"] == [{"name": "output0", "shape": [1, 7, 12 * 16 + 6 * 8 + 3 * 4]}]
    session = ort.InferenceSession(str(project / "build/p/m/imported.onnx"))
    (out,) = session.run(None, {"images": np.zeros((1, 3, 96, 128), np.float32)})
    assert out.shape == (1, 7, 252)


def test_nhwc_input_keeps_its_layout(project: Path) -> None:
    _import(project, "models/nhwc.onnx", "[[40, 24, 3]]")
    assert _record(project)["inputs"] == [{"name": "input_1", "shape": [1, 40, 24, 3], "layout": "NHWC"}]
    out = _imported(project).graph.output[0]
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == [1, 40, 24, 8]


def test_multi_input_model_in_input_order(project: Path) -> None:
    _import(project, "models/multi_input.onnx", "[auto, [4]]")
    inputs = _record(project)["inputs"]
    assert [(i["name"], i["shape"]) for i in inputs] == [("image", [1, 3, 16, 16]), ("meta", [1, 4])]


def test_static_model_needs_no_shapes(project: Path) -> None:
    _import(project, "models/tinycls.onnx")
    assert _record(project)["inputs"][0]["shape"] == [1, 3, 32, 32]


def test_dynamic_dims_without_shapes_name_the_input(project: Path) -> None:
    result = _import(project, "models/tinydet.onnx", expect=2)
    assert ("input 'images' of model 'm' has dynamic dimensions [batch, 3, height, width]; "
            "give its shape in input_shapes") in result.stderr


def test_shape_that_conflicts_with_fixed_dims(project: Path) -> None:
    result = _import(project, "models/tinycls.onnx", "{input: [32, 32, 4]}", expect=2)
    assert "p.yaml:6:27: shape [32, 32, 4] does not fit input 'input' of model 'm'" in result.stderr


def test_random_bytes_named_onnx(project: Path) -> None:
    (project / "models/junk.onnx").write_bytes(np.random.default_rng(0).bytes(2000))
    result = _import(project, "models/junk.onnx", expect=2)
    assert "p.yaml:5:11: models/junk.onnx: not an ONNX model" in result.stderr


def test_external_data_outside_the_model_folder_is_refused(project: Path) -> None:
    model = models.static_mlp()
    weight = model.graph.initializer[0]
    (project / "secret.bin").write_bytes(numpy_helper.to_array(weight).tobytes())
    weight.raw_data = numpy_helper.to_array(weight).tobytes()
    del weight.float_data[:]
    onnx.external_data_helper.set_external_data(weight, location="../secret.bin")
    weight.data_location = onnx.TensorProto.EXTERNAL
    weight.ClearField("raw_data")
    (project / "models/ext.onnx").write_bytes(model.SerializeToString())
    result = _import(project, "models/ext.onnx", expect=2)
    assert "external data must be a file in the model's own folder" in result.stderr


def test_external_data_next_to_the_model_is_read(project: Path) -> None:
    model = models.static_mlp()
    onnx.save(model, project / "models/ext.onnx", save_as_external_data=True, location="ext.bin",
              size_threshold=0)
    _import(project, "models/ext.onnx")
    imported = _imported(project)
    assert all(not onnx.external_data_helper.uses_external_data(t) for t in imported.graph.initializer)


@pytest.mark.parametrize("opset", [13, 17])
def test_imported_model_runs_like_the_original(tmp_path: Path, opset: int) -> None:
    original = models.tiny_detector(opset=opset)
    (tmp_path / "models").mkdir()
    onnx.save(original, tmp_path / "models/det.onnx")
    _import(tmp_path, "models/det.onnx", "{images: [64, 64, 3]}")
    x = np.random.default_rng(1).standard_normal((1, 3, 64, 64)).astype(np.float32)
    want = ort.InferenceSession(original.SerializeToString()).run(None, {"images": x})
    got = ort.InferenceSession(str(tmp_path / "build/p/m/imported.onnx")).run(None, {"images": x})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-3)  # BN folding rounds differently


def test_keras_without_the_converter_names_the_extra(project: Path) -> None:
    try:
        import tensorflow  # noqa: F401
        pytest.skip("TensorFlow is installed here")
    except ImportError:
        pass
    (project / "models/net.h5").write_bytes(b"\x89HDF\r\n\x1a\n")
    result = _import(project, "models/net.h5", expect=2)
    assert "p.yaml:5:11: models/net.h5: .h5 models need the TensorFlow converter extra" in result.stderr
    assert "accelbuild[tensorflow]" in result.stderr


@pytest.mark.parametrize("builder", ["mobilenet_like", "detection_head", "fp16_weights", "quantized_cnn"])
def test_tflite_models_build_through_import_and_crop(tmp_path: Path, builder: str) -> None:
    from accelbuild.testing import tflite_models

    (tmp_path / "models").mkdir()
    (tmp_path / "models/net.tflite").write_bytes(getattr(tflite_models, builder)())
    write(tmp_path / "p.yaml", "accelbuild: 1\nname: p\nmodels:\n  - name: m\n    path: models/net.tflite\n"
                               "    crop: {auto: true}\n")
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--until", "crop", cwd=tmp_path)
    assert result.code == 0, result.stderr
    record = _record(tmp_path)
    assert record["source"]["format"] == "tflite"
    assert all(i["layout"] in ("as-is", "NHWC") for i in record["inputs"])
    crop = json.loads((tmp_path / "build/p/m/crop.json").read_text())
    assert crop["check"]["max_rel_err"] < 1e-4


def test_vendor_domain_operators_are_listed(project: Path) -> None:
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])
    node = onnx.helper.make_node("FastGelu", ["x"], ["y"], name="gelu", domain="com.microsoft")
    model = onnx.helper.make_model(onnx.helper.make_graph([node], "g", [x], [y]), ir_version=8,
                                   opset_imports=[onnx.helper.make_opsetid("", 17),
                                                  onnx.helper.make_opsetid("com.microsoft", 1)])
    onnx.save(model, project / "models/vendor.onnx")
    result = _import(project, "models/vendor.onnx", expect=2)
    assert "models/vendor.onnx: unsupported ONNX model: com.microsoft.FastGelu (node 'gelu')" in result.stderr


def test_truncated_tflite_is_a_clear_error(project: Path) -> None:
    from accelbuild.testing import tflite_models

    data = tflite_models.mobilenet_like()
    (project / "models/cut.tflite").write_bytes(data[: len(data) // 2])
    result = _import(project, "models/cut.tflite", expect=2)
    assert "p.yaml:5:11: models/cut.tflite: " in result.stderr


def _save(project: Path, name: str, nodes: list, inputs: list, outputs: list, opset: int = 17) -> str:
    graph = onnx.helper.make_graph(nodes, "g", inputs, outputs)
    model = onnx.helper.make_model(graph, ir_version=8 if opset <= 18 else 10,
                                   opset_imports=[onnx.helper.make_opsetid("", opset)])
    onnx.save(model, project / "models" / name)
    return f"models/{name}"


def test_an_empty_input_is_named_as_such(project: Path) -> None:
    """A static zero-size dimension is not dynamic: no input_shapes value (all >= 1) could fix it."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])
    like = onnx.helper.make_tensor_value_info("like", onnx.TensorProto.DOUBLE, [0])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.DOUBLE, [3])
    path = _save(project, "castlike.onnx", [onnx.helper.make_node("CastLike", ["x", "like"], ["y"], name="cast")],
                 [x, like], [y])
    result = _import(project, path, expect=2)
    assert ("input 'like' of model 'm' is an empty tensor: the model fixes its shape to [0], so it holds no "
            "values; accelbuild imports inputs that carry data (it only gives CastLike 'cast' an element type: "
            "export a Cast to that type instead)") in result.stderr
    assert "dynamic" not in result.stderr and "input_shapes" not in result.stderr


def test_a_sequence_input_is_refused_as_such(project: Path) -> None:
    seq = onnx.helper.make_tensor_sequence_value_info("s", onnx.TensorProto.FLOAT, None)
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n"])
    path = _save(project, "seq.onnx", [onnx.helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)], [seq], [y])
    result = _import(project, path, expect=2)
    assert "p.yaml:5:11: models/seq.onnx: unsupported ONNX model: input 's' is a sequence, not a tensor\n" \
        in result.stderr


def test_an_opset_9_model_is_upgraded(project: Path) -> None:
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    graph = onnx.helper.make_graph([onnx.helper.make_node("Upsample", ["x", "scales"], ["y"])], "g",
                                   [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 3, 3])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2, 6, 6])],
                                   [scales])
    onnx.save(onnx.helper.make_model(graph, ir_version=4, opset_imports=[onnx.helper.make_opsetid("", 9)]),
              project / "models/up9.onnx")
    result = _import(project, "models/up9.onnx")
    assert "warning" not in result.stderr
    record = _record(project)
    assert record["opsets"] == {"ai.onnx": 21}
    assert record["op_types"] == {"Resize": 1}
    assert record["passes"][-1]["pass"] == "verify"


def test_lenient_shape_inference_where_strict_fails(project: Path) -> None:
    """onnx's strict inference fails inside MeanVarianceNormalization's function body; lenient works."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 3, 3, 1])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 3, 3, 1])
    path = _save(project, "mvn.onnx", [onnx.helper.make_node("MeanVarianceNormalization", ["x"], ["y"])], [x], [y],
                 opset=13)
    write(project / "p.yaml", f"accelbuild: 1\nname: p\nmodels:\n  - name: m\n    path: {path}\n")
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--until", "import", cwd=project)
    assert result.code == 0, result.stderr
    assert result.stderr.count("strict shape inference failed") == 1
    assert "continuing with onnx's lenient inference" in result.stderr


def test_a_wrongly_declared_output_shape_is_replaced_by_what_the_model_produces(tmp_path: Path) -> None:
    """A converter declared the output rank 2; the Reshape makes rank 3. Import records what the model
    produces, and the build goes through assemble (it crashed on shape (0, 0))."""
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 192])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "shape"], ["y"], name="flat")]
    graph = helper.make_graph(nodes, "g", [x], [y], [numpy_helper.from_array(np.array([1, 3, 64], np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "m.onnx")
    (tmp_path / "p.yaml").write_text("accelbuild: 1\nmodels:\n  - path: m.onnx\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    imported = onnx.load(tmp_path / "build/p/m/imported.onnx")
    assert [d.dim_value for d in imported.graph.output[0].type.tensor_type.shape.dim] == [1, 3, 64]


def _external_weights(path: Path) -> list[tuple[str, int, int]]:
    """(tensor, offset, length) of every initializer stored in an external-data file."""
    model = onnx.load(path, load_external_data=False)
    found = []
    for tensor in model.graph.initializer:
        if onnx.external_data_helper.uses_external_data(tensor):
            info = {e.key: e.value for e in tensor.external_data}
            found.append((tensor.name, int(info.get("offset", 0)), int(info["length"])))
    return found


def test_editing_an_external_data_file_reruns_import(project: Path) -> None:
    """The issue's repro: a Conv model with its weights in ext.bin; doubling them must rebuild the import."""
    model = onnx.load(project / "models/tinycls.onnx")
    assert any(n.op_type == "Conv" for n in model.graph.node)
    onnx.save(model, project / "models/ext.onnx", save_as_external_data=True, location="ext.bin", size_threshold=0)
    write(project / "p.yaml", "accelbuild: 1\nname: p\nmodels:\n  - name: m\n    path: models/ext.onnx\n")
    run = ("run", "p.yaml", "--state-dir", "s", "--until", "import", "--json")
    first = run_cli(*run, cwd=project)
    assert first.code == 0, first.stderr
    assert first.statuses() == {"p:m:import": "ran"}
    before = {t.name: numpy_helper.to_array(t) for t in _imported(project).graph.initializer}

    blob = bytearray((project / "models/ext.bin").read_bytes())
    conv_weight = next(n.input[1] for n in model.graph.node if n.op_type == "Conv")
    name, offset, length = next(w for w in _external_weights(project / "models/ext.onnx") if w[0] == conv_weight)
    values = np.frombuffer(bytes(blob[offset:offset + length]), dtype=np.float32) * 2  # the first conv's weights
    blob[offset:offset + length] = values.astype(np.float32).tobytes()
    (project / "models/ext.bin").write_bytes(bytes(blob))

    status = run_cli("status", "p.yaml", "--state-dir", "s", cwd=project)
    assert "input external:ext.bin changed" in status.stdout, status.stdout
    second = run_cli(*run, cwd=project)
    assert second.code == 0, second.stderr
    assert second.statuses() == {"p:m:import": "ran"}  # not "up-to-date": the build is not stale
    after = {t.name: numpy_helper.to_array(t) for t in _imported(project).graph.initializer}
    changed = [k for k in after if k in before and not np.array_equal(after[k], before[k])]
    assert changed  # the imported model carries the new weights (a batchnorm folded into them keeps x2)
    for k in changed:
        np.testing.assert_allclose(after[k], 2 * before[k], rtol=1e-6)
    assert run_cli(*run, cwd=project).statuses() == {"p:m:import": "up-to-date"}


def test_a_broken_model_file_does_not_crash_planning(project: Path) -> None:
    """The plan reads an ONNX model for its external-data files; a broken one is the import stage's to report."""
    (project / "models/broken.onnx").write_bytes(b"\x0a\x08location" + bytes(range(200)))
    result = _import(project, "models/broken.onnx", expect=2)
    assert "p.yaml:5:11: models/broken.onnx: not an ONNX model" in result.stderr


def test_ten_seconds_of_16_khz_audio_is_an_input_shape(project: Path) -> None:
    """160,000 samples in one dimension, past the 65,536 the schema once capped: imported and built."""
    rng = np.random.default_rng(0)
    nodes = [onnx.helper.make_node("Reshape", ["audio", "frames"], ["r"]),
             onnx.helper.make_node("Conv", ["r", "w"], ["c"], strides=[1, 400], kernel_shape=[1, 400]),
             onnx.helper.make_node("Relu", ["c"], ["y"])]
    graph = onnx.helper.make_graph(
        nodes, "g", [onnx.helper.make_tensor_value_info("audio", onnx.TensorProto.FLOAT, [1, "samples"])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 8, 1, "frames"])],
        [numpy_helper.from_array(np.array([1, 1, 1, -1], np.int64), "frames"),
         numpy_helper.from_array((rng.standard_normal((8, 1, 1, 400)) * 0.05).astype(np.float32), "w")])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]),
              project / "models" / "audio.onnx")
    _import(project, "models/audio.onnx", "{audio: [160000]}")
    assert _record(project)["inputs"] == [{"name": "audio", "shape": [1, 160000], "layout": "as-is"}]
    assert _record(project)["outputs"] == [{"name": "y", "shape": [1, 8, 1, 400]}]
