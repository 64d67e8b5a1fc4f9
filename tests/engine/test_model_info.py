"""accelbuild tensors / init, and validate opening the models."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli, write


def test_tensors_lists_inputs_outputs_cut_points_and_the_auto_crop(project: Path) -> None:
    result = run_cli("tensors", "models/tinydet.onnx", "--input-shape", "images=64,64,3", "--json", cwd=project)
    assert result.code == 0, result.stderr
    info = result.json()
    assert info["inputs"] == [{"name": "images", "shape": [1, 3, 64, 64], "layout": "NCHW"}]
    assert [o["name"] for o in info["outputs"]] == ["output0"]
    names = [t["name"] for t in info["candidate_crop_tensors"]]
    assert "stem.act.mul" in names and "decode.concat" in names
    assert info["auto_crop"]["outputs"] == ["head.p5", "head.p4", "head.p3"]


def test_tensors_on_a_dynamic_model_asks_for_the_shape(project: Path) -> None:
    result = run_cli("tensors", "models/tinydet.onnx", cwd=project)
    assert result.code == 2
    assert result.stderr.startswith("models/tinydet.onnx: input 'images' has dynamic dimensions "
                                    "[batch, 3, height, width]; give --input-shape NAME=H,W,C")
    bad = run_cli("tensors", "models/tinydet.onnx", "--input-shape", "images=64,x", cwd=project)
    assert bad.code == 2 and "expected NAME=H,W,C" in bad.stderr


def test_reading_a_model_checks_given_shapes_without_the_schema(project: Path) -> None:
    """``tensors`` describes a model through a pipeline it writes itself, not checked against the JSON Schema
    (jsonschema stays out of the process); the shapes a library caller gives meet the schema's rule all the same."""
    import subprocess
    import sys

    from accelbuild.engine.model_info import read_model
    from accelbuild.errors import InputFileError

    for shape in ([0, 64, 3], [64] * 9, [64, 64.0, 3]):
        with pytest.raises(InputFileError, match="expected 1 to 8 whole numbers from 1 to 268435456"):
            read_model(project / "models/tinydet.onnx", {"images": shape})
    code = ("import sys\nfrom pathlib import Path\nfrom accelbuild.engine.model_info import read_model\n"
            "info = read_model(Path('models/tinydet.onnx'), {'images': [64, 64, 3]})\n"
            "print(info.inputs[0]['shape'], 'jsonschema' in sys.modules, 'accelbuild.targets.mx3.target' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines() == ["[1, 3, 64, 64] False False"], done.stderr


def test_init_writes_a_pipeline_that_builds_and_never_overwrites(project: Path) -> None:
    result = run_cli("init", "models/nhwc.onnx", "-o", "conf/nhwc.yaml", "--input-shape", "input_1=16,16,3", cwd=project)
    assert result.code == 0, result.stderr
    text = (project / "conf/nhwc.yaml").read_text()
    assert 'path: "../models/nhwc.onnx"' in text and "# crop:" in text
    assert run_cli("run", "conf/nhwc.yaml", "-q", cwd=project).code == 0
    again = run_cli("init", "models/nhwc.onnx", "-o", "conf/nhwc.yaml", "--input-shape", "input_1=16,16,3", cwd=project)
    assert again.code == 2 and again.stderr.startswith("conf/nhwc.yaml: already exists")


def test_init_for_each_family_with_data_builds_as_written(project: Path) -> None:
    """init --family F [--platform P] [--data DIR] writes a pipeline that builds; a static NCHW input is written
    channel-last and imported as NCHW."""
    import numpy as np
    from PIL import Image

    (project / "imgs").mkdir()
    for i in range(3):
        Image.fromarray((np.random.default_rng(i).random((40, 48, 3)) * 255).astype(np.uint8)).save(
            project / "imgs" / f"{i}.png")
    for family, platform in (("mx3", None), ("npu", "x5"), ("cpu", None)):
        out = f"{family}.yaml"
        result = run_cli("init", "models/tinycls.onnx", "--family", family, *(["--platform", platform] if platform
                                                                               else []), "--data", "imgs", "-o", out,
                         cwd=project)
        assert result.code == 0, result.stderr
        text = (project / out).read_text()
        assert f"family: {family}" in text and 'path: "imgs"' in text
        assert '"input": [32, 32, 3]' in text  # the model's [1, 3, 32, 32], channel-last
        built = run_cli("run", out, "--json", cwd=project)
        assert built.code == 0, built.stderr
    record = (project / "build/tinycls-cpu/tinycls/import.json").read_text()
    assert '"layout": "NCHW"' in record
    missing = run_cli("init", "models/tinycls.onnx", "--family", "npu", "-o", "n.yaml", cwd=project)
    assert missing.code == 2 and missing.stderr.startswith("init: --family npu needs --platform P: a built-in platform")
    typo = run_cli("init", "models/tinycls.onnx", "--family", "npu", "--platform", "TDA4VM", cwd=project)
    assert typo.code == 2 and typo.stderr.rstrip().endswith("did you mean 'tda4vm'?")


def _gray_model(path: Path) -> None:
    """A 1-channel image model: Conv 1 -> 4 channels on [1, 1, 16, 16]."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 1, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "gray",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def test_init_of_a_one_channel_model_writes_gray_and_builds(project: Path) -> None:
    import numpy as np
    from PIL import Image

    _gray_model(project / "models/gray.onnx")
    (project / "imgs").mkdir()
    for i in range(2):
        Image.fromarray((np.random.default_rng(i).random((20, 20, 3)) * 255).astype(np.uint8)).save(
            project / "imgs" / f"{i}.png")
    result = run_cli("init", "models/gray.onnx", "--family", "cpu", "--data", "imgs", "-o", "g.yaml", cwd=project)
    assert result.code == 0, result.stderr
    text = (project / "g.yaml").read_text()
    assert "color: gray" in text and '"x": [16, 16, 1]' in text
    built = run_cli("run", "g.yaml", "-q", cwd=project)
    assert built.code == 0, built.stderr


def test_init_names_carry_the_family_and_platform_so_pipelines_do_not_collide(project: Path) -> None:
    for args, out in ((("--family", "mx3"), "a.yaml"), (("--family", "npu", "--platform", "tda4vm"), "b.yaml"),
                      (("--family", "ethos-u"), "c.yaml")):
        assert run_cli("init", "models/tinycls.onnx", *args, "-o", out, cwd=project).code == 0
    names = [next(line for line in (project / f).read_text().splitlines() if line.startswith("name:"))
             for f in ("a.yaml", "b.yaml", "c.yaml")]
    assert names == ["name: tinycls-mx3", "name: tinycls-npu-tda4vm", "name: tinycls-ethos-u55-128"]
    assert run_cli("validate", "a.yaml", "b.yaml", "c.yaml", cwd=project).code == 0
    # two pipelines of one run that would write one folder: exit 2 at load, naming both files
    write(project / "d.yaml", (project / "a.yaml").read_text().replace("name: tinycls-mx3", "name: other\n"
                                                                       "output: {dir: build/tinycls-mx3}"))
    clash = run_cli("run", "a.yaml", "d.yaml", cwd=project)
    assert clash.code == 2 and "Traceback" not in clash.stderr
    assert clash.stderr.startswith("d.yaml:") and "output folder" in clash.stderr and "a.yaml" in clash.stderr
    assert not (project / "build").exists()


def test_init_writes_the_vendor_families_with_their_default_platforms(project: Path) -> None:
    """rknn and qnn pipelines load as written without their toolchains (loading needs none)."""
    for args, out, name, line in ((("--family", "rknn"), "r.yaml", "tinycls-rknn-rk3588", "  platform: rk3588"),
                                  (("--family", "qnn", "--platform", "sm8550"), "q.yaml", "tinycls-qnn-sm8550",
                                   "  soc: sm8550")):
        assert run_cli("init", "models/tinycls.onnx", *args, "-o", out, cwd=project).code == 0
        text = (project / out).read_text()
        assert f"name: {name}\n" in text and line in text
    assert run_cli("validate", "r.yaml", "q.yaml", cwd=project).code == 0
    wrong = run_cli("init", "models/tinycls.onnx", "--family", "cpu", "--platform", "x", cwd=project)
    assert wrong.code == 2 and "--platform applies to --family ethos-u, npu, qnn, rknn, not cpu" in wrong.stderr
    unknown = run_cli("init", "models/tinycls.onnx", "--family", "rknn", "--platform", "rk9999", "-o", "u.yaml",
                      cwd=project)  # only the schema knows rknn's SoCs: a --platform is checked against it
    assert unknown.code == 2 and unknown.stderr.startswith("init: 'rk9999' is not one of 'rk3562'")
    assert not (project / "u.yaml").exists()


def test_init_without_a_platform_writes_a_valid_pipeline_without_jsonschema(project: Path) -> None:
    """Every value init writes is its own or checked without the JSON Schema (data, input shapes), so init
    checks the file it writes without importing jsonschema; the file validates all the same."""
    import subprocess
    import sys

    code = ("import sys\nfrom accelbuild import api\n"
            "api.init('models/tinydet.onnx', 'd.yaml', input_shapes={'images': [64, 64, 3]})\n"
            "print('jsonschema' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines() == ["False"], done.stderr
    assert run_cli("validate", "d.yaml", cwd=project).code == 0


def test_init_data_needs_images_or_arrays(project: Path) -> None:
    (project / "empty").mkdir()
    (project / "notes").mkdir()
    (project / "notes/readme.txt").write_text("no images here")
    for folder in ("empty", "notes", "missing"):
        result = run_cli("init", "models/tinycls.onnx", "--data", folder, "-o", f"{folder}.yaml", cwd=project)
        assert result.code == 2 and result.stderr.startswith(f"{folder}: "), result.stderr
        assert not (project / f"{folder}.yaml").exists()
    # images cannot feed a model with two inputs: the pipeline would not build as written
    import numpy as np
    from PIL import Image

    (project / "imgs").mkdir()
    Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(project / "imgs/0.png")
    result = run_cli("init", "models/multi_input.onnx", "--data", "imgs", "-o", "mi.yaml", cwd=project)
    assert result.code == 2 and result.stderr.startswith(
        "init: --data is a folder of images, but the model has 2 inputs (image, meta)")
    assert not (project / "mi.yaml").exists()


def test_channel_first_input_shapes_say_what_was_meant(project: Path) -> None:
    write(project / "p.yaml", "accelbuild: 1\nmodels:\n  - path: models/tinycls.onnx\n"
                              "    input_shapes: {input: [3, 32, 32]}\n")
    result = run_cli("validate", "p.yaml", cwd=project)
    assert result.code == 2
    assert result.stderr.splitlines()[0] == (
        "p.yaml:4:27: input_shapes are channel-last (H, W, C): [3, 32, 32] reads as H=3, W=32, C=32, which fits "
        "input 'input' of model 'tinycls' [1, 3, 32, 32] only as NHWC; the model reads it channel-first, so you "
        "probably meant [32, 32, 3]")


def test_validate_opens_the_models(project: Path) -> None:
    write(project / "p.yaml", "accelbuild: 1\nmodels:\n  - name: det\n    path: models/tinydet.onnx\n"
                              "    input_shapes: {image: [64, 64, 3]}\n"
                              "  - name: cls\n    path: models/tinycls.onnx\n    crop: {outputs: [logitz]}\n"
                              "  - name: mlp\n    path: models/mlp.onnx\n    quantize: {bits: {fc9: 16}}\n")
    result = run_cli("validate", "p.yaml", cwd=project)
    assert result.code == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("p.yaml:")]
    assert lines == [
        "p.yaml:5:20: model 'det' has no input named 'image'; did you mean 'images'? "
        "(its inputs: images)",
        "p.yaml:8:22: no tensor or node named 'logitz' in model 'cls'; did you mean 'logits'?",
        "p.yaml:11:23: no weighted layer named 'fc9' in model 'mlp'; did you mean 'fc1'?",
    ]
    assert not (project / "build").exists() and not (project / ".accelbuild").exists()


def test_validate_reports_every_data_and_family_mistake_at_once(project: Path) -> None:
    """count beyond the folder, a resize that does not fit the model, every unreadable image, and (ethos-u) an
    operator the TFLite writer cannot emit: all positioned, in one validate, before any run."""
    pytest.importorskip("ethosu.vela")
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
    from PIL import Image

    (project / "imgs").mkdir()
    for i in range(3):
        Image.fromarray((np.random.default_rng(i).random((40, 48, 3)) * 255).astype(np.uint8)).save(
            project / "imgs" / f"{i}.png")
    (project / "imgs" / "7.png").write_bytes(b"not a png")
    (project / "imgs" / "8.png").write_bytes(b"nor this")
    graph = helper.make_graph([helper.make_node("Erf", ["x"], ["y"], name="erf")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 17)]), project / "models/erf.onnx")
    write(project / "p.yaml", "accelbuild: 1\nmodels:\n  - path: models/tinycls.onnx\n    data:\n      path: imgs\n"
                              "      count: 10\n      preprocess: {resize: [64, 64]}\n"
                              "  - path: models/erf.onnx\ntarget: {family: ethos-u}\n")
    result = run_cli("validate", "p.yaml", cwd=project)
    assert result.code == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("p.yaml:")]
    assert lines[:2] == ["p.yaml:6:14: count is 10 but the folder holds only 5 images",
                         "p.yaml:7:19: resize [64, 64] does not fit input 'input' [1, 3, 32, 32] float32 (NCHW)"]
    assert [line.split(": ")[1] for line in lines[2:4]] == ["imgs/7.png", "imgs/8.png"]
    assert all(line.startswith("p.yaml:5:13:") and "not a readable image" in line for line in lines[2:4])
    assert lines[4].startswith("p.yaml:8:11: model 'erf': operator Erf (1 node(s): erf) cannot be written by the "
                               "ethos-u int8 TFLite writer")
