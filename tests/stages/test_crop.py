"""The crop stage: sections at given points, from a MemryX in/out file, or predicted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from accelbuild.passes.sections import read_section

from conftest import run_cli, write

HEAD = "[head.p3, head.p4, head.p5]"


def _crop(project: Path, crop: str, expect: int = 0, shapes: str = "{images: [320, 320, 3]}"):
    write(project / "p.yaml", f"accelbuild: 1\nname: p\nmodels:\n  - name: det\n    path: models/tinydet.onnx\n"
                              f"    input_shapes: {shapes}\n    crop: {crop}\n")
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--until", "crop", cwd=project)
    assert result.code == expect, result.stderr
    assert "Traceback" not in result.stderr
    return result


def _record(project: Path) -> dict:
    return json.loads((project / "build/p/det/crop.json").read_text())


def _no_section(path: Path) -> bool:
    """``path`` holds the crop stage's no-section form (written when nothing is cut off there)."""
    return path.is_file() and read_section(path) is None


def test_head_outputs_split_ai_and_post_exactly(project: Path) -> None:
    _crop(project, f"{{outputs: {HEAD}}}", shapes="{images: [256, 192, 3]}")
    folder = project / "build/p/det"
    record = _record(project)
    assert record["mode"] == "manual" and record["fallback"] is None
    assert record["outputs"] == ["head.p3", "head.p4", "head.p5"]
    assert record["check"]["max_rel_err"] < 1e-4
    assert (folder / "ai.onnx").is_file() and read_section(folder / "post.onnx") is not None
    assert _no_section(folder / "pre.onnx")
    x = np.random.default_rng(3).random((1, 3, 256, 192), dtype=np.float32)
    (want,) = ort.InferenceSession(str(folder / "imported.onnx")).run(None, {"images": x})
    heads = ort.InferenceSession(str(folder / "ai.onnx")).run(None, {"images": x})
    post = ort.InferenceSession(str(folder / "post.onnx"))
    (got,) = post.run(None, dict(zip([i.name for i in post.get_inputs()], heads)))
    assert np.max(np.abs(got - want)) / np.max(np.abs(want)) < 1e-4


def test_auto_finds_the_heads_and_says_so(project: Path) -> None:
    result = _crop(project, "{auto: true}")
    assert "det: auto crop: inputs images, outputs head.p5, head.p4, head.p3" in result.stderr
    record = _record(project)
    assert record["mode"] == "auto" and sorted(record["outputs"]) == ["head.p3", "head.p4", "head.p5"]
    assert record["reasons"] and "post-processing" in record["reasons"][0]
    assert record["check"]["max_abs_err"] == 0.0


def test_in_out_file(project: Path) -> None:
    write(project / "crop.json", json.dumps({"outputs": ["head.p3", "head.p4", "head.p5"]}))
    _crop(project, "{in_out_file: crop.json}")
    assert _record(project)["mode"] == "in_out_file"
    assert (project / "build/p/det/post.onnx").is_file()
    write(project / "crop.json", json.dumps({"outputs": ["head.p9"]}))
    result = _crop(project, "{in_out_file: crop.json}", expect=2)
    assert "crop.json: no tensor or node named 'head.p9' in the model; did you mean 'head.p5'?" in result.stderr


def test_unknown_name_is_positioned_with_a_suggestion(project: Path) -> None:
    result = _crop(project, "{outputs: [head.p3, head.p4, hed.p5]}", expect=2)
    assert "p.yaml:7:40: no tensor or node named 'hed.p5' in model 'det'; did you mean 'head.p5'?" in result.stderr


def test_node_name_means_its_outputs(project: Path) -> None:
    _crop(project, "{outputs: [decode.output]}")  # the node that writes output0
    record = _record(project)
    assert record["outputs"] == ["output0"]
    assert set(record["sections"]) == {"ai"}


def test_a_tflite_tensor_kept_channel_first_is_cut_after_its_fused_activation(project: Path) -> None:
    """BlazeFace's ADD with a fused RELU: the import keeps "block/add" only channel-first, as
    "block/add/nchw"; the node "block/add" makes the sum before the RELU. The crop point means the tensor of
    the .tflite file, after the RELU."""
    from accelbuild.testing import tflite_models

    (project / "models/blaze.tflite").write_bytes(tflite_models.blaze_blocks())
    write(project / "p.yaml", "accelbuild: 1\nname: p\nmodels:\n  - name: det\n    path: models/blaze.tflite\n"
                              "    crop: {outputs: [block/add]}\n")
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--until", "crop", cwd=project)
    assert result.code == 0, result.stderr
    record = _record(project)
    assert record["outputs"] == ["block/add/nchw"] and record["check"]["max_rel_err"] < 1e-4
    (ai_output,) = [o.name for o in read_section(project / "build/p/det/ai.onnx").graph.output]
    assert ai_output == "block/add/nchw"


def test_overlapping_cut_fails_the_crop_naming_the_tensors_still_needed(project: Path) -> None:
    result = _crop(project, "{outputs: [head.p3]}", expect=1)
    assert "p:det:crop: det: cannot crop: the post section still needs 'neck.p4.fuse.act.mul', " \
           "'neck.p5.lateral.act.mul' from inside the ai section" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (project / "build/p/det/ai.onnx").exists()


def test_allow_partial_builds_the_requested_ai_section_alone(project: Path) -> None:
    result = _crop(project, "{outputs: [head.p3], allow_partial: true}")
    assert "building the requested ai section alone" in result.stderr
    record = _record(project)
    assert record["fallback"].startswith("allow_partial") and set(record["sections"]) == {"ai"}
    assert record["outputs"] == ["head.p3"]  # the requested section, never the whole model
    assert _no_section(project / "build/p/det/post.onnx")
    assert _no_section(project / "build/p/det/pre.onnx")


def test_pre_section_for_a_layout_transpose(project: Path) -> None:
    write(project / "p.yaml", "accelbuild: 1\nname: p\nmodels:\n  - name: det\n    path: models/nhwc.onnx\n"
                              "    input_shapes: [[16, 16, 3]]\n    crop: {auto: true}\n")
    result = run_cli("run", "p.yaml", "--state-dir", "s", cwd=project)
    assert result.code == 0, result.stderr
    record = _record(project)
    assert set(record["sections"]) == {"pre", "ai", "post"}
    assert record["check"]["max_abs_err"] == 0.0


def test_crop_change_reruns_only_crop(project: Path) -> None:
    _crop(project, f"{{outputs: {HEAD}}}")
    write(project / "p.yaml", (project / "p.yaml").read_text().replace(HEAD, "[output0]"))
    result = run_cli("run", "p.yaml", "--state-dir", "s", "--json", "--until", "crop", cwd=project)
    assert result.statuses() == {"p:det:import": "up-to-date", "p:det:crop": "ran"}
    assert _no_section(project / "build/p/det/post.onnx")  # the old post section went away


def test_integer_inputs_are_cut_into_the_pre_section_and_the_rest_is_quantized(tmp_path: Path) -> None:
    """Magika's case: an int32 byte input one-hot encoded by integer ops. Before, npu's quantizer skipped the
    whole graph and reported cosine 1.00000 (float compared with float) with layers 'on the NPU'."""
    import onnx
    from passes.test_auto_crop import byte_classifier

    onnx.save(byte_classifier(), tmp_path / "m.onnx")
    write(tmp_path / "p.yaml", "accelbuild: 1\nname: p\ntarget: {family: npu, platform: tda4vm}\n"
                               "benchmark: {frames: 10}\nmodels:\n  - name: m\n    path: m.onnx\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "integer input 'bytes': 4 node(s)" in result.stderr
    crop = json.loads((tmp_path / "build/p/m/crop.json").read_text())
    assert crop["mode"] == "integer_inputs" and crop["inputs"] == ["one_hot"]
    assert [n.op_type for n in read_section(tmp_path / "build/p/m/pre.onnx").graph.node] == \
        ["Reshape", "Expand", "Equal", "Cast"]
    quantize = json.loads((tmp_path / "build/p/m/quantize.json").read_text())
    assert quantize["weight_bytes"] > 0
    accuracy = json.loads((tmp_path / "build/p/benchmark.json").read_text())["models"][0]["accuracy"]
    assert 0 < accuracy["max_abs_err"] and accuracy["cosine"] > 0.98


def test_an_empty_output_is_refused_at_its_position_and_cropping_it_off_builds(tmp_path: Path) -> None:
    """An output sliced to zero length held no values and crashed mx3's assemble; now a positioned error."""
    inits = [numpy_helper.from_array(np.ones((8, 4, 1, 1), np.float32), "w"),
             *(numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("zero", 0), ("axis", 3)))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["r"]), helper.make_node("Slice", ["r", "zero", "zero", "axis"],
                                                                          ["none"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 1, 16])],
                              [helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 8, 1, 16]),
                               helper.make_tensor_value_info("none", TensorProto.FLOAT, [1, 8, 1, 0])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    text = "accelbuild: 1\nname: p\nmodels:\n  - name: m\n    path: m.onnx\n"
    write(tmp_path / "p.yaml", text)
    refused = run_cli("run", "p.yaml", "--until", "crop", cwd=tmp_path)
    assert refused.code == 2 and "Traceback" not in refused.stderr
    assert ("p.yaml:5:11: model 'm': output 'none' is an empty tensor [1, 8, 1, 0], so it holds no values; "
            "accelbuild builds outputs that carry data: name the others in crop.outputs") in refused.stderr
    write(tmp_path / "p.yaml", text + "    crop: {outputs: [r]}\n")
    assert run_cli("run", "p.yaml", cwd=tmp_path).code == 0


def test_outputs_only_looked_at_skip_the_composition_check(project: Path) -> None:
    """``measured=False`` (validate): the same sections, without the composition figure that only crop.json keeps."""
    from accelbuild.config.load import load_pipeline
    from accelbuild.engine.plan import plan
    from accelbuild.stages import crop, import_
    from accelbuild.stages.context import StageContext

    write(project / "p.yaml", f"accelbuild: 2\nname: p\nmodels:\n  - name: det\n    path: models/tinydet.onnx\n"
                              f"    input_shapes: {{images: [320, 320, 3]}}\n    crop: {{outputs: {HEAD}}}\n")
    jobs = {job.stage: job for job in plan([load_pipeline(str(project / "p.yaml"))], until="crop")}
    records = {}
    for measured in (True, False):
        out = project / f"out-{measured}"
        files = {name: out / name for name in (*jobs["import"].outputs, *jobs["crop"].outputs)}
        out.mkdir()
        import_.run(StageContext(jobs["import"].params, jobs["import"].inputs,
                                 {n: files[n] for n in jobs["import"].outputs}, jobs["import"].locate))
        crop.run(StageContext(jobs["crop"].params, {"imported": files["imported.onnx"]},
                              {n: files[n] for n in jobs["crop"].outputs}, jobs["crop"].locate, measured=measured))
        records[measured] = json.loads(files["crop.json"].read_text())
        assert read_section(files["post.onnx"]) is not None
    assert records[True]["check"]["samples"] == 2 and records[True]["check"]["max_rel_err"] < 1e-4
    assert records[False]["check"] == {"samples": 0,
                                       "error": "not checked: the outputs are only looked at (validate)"}
    assert {k: v for k, v in records[True].items() if k != "check"} == \
        {k: v for k, v in records[False].items() if k != "check"}
