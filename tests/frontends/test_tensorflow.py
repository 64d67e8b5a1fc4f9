"""Keras 3 (.keras, .h5, .hdf5), SavedModel folders and frozen graphs (.pb) through TensorFlow's TFLite converter
(the ``tensorflow`` extra): real architectures, outputs against TensorFlow's own, bad files as positioned
errors, and none of TensorFlow's chatter in accelbuild's output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from conftest import run_cli, write

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

TOLERANCE = 1e-4  # float32 through two runtimes: relative to the output's range


def _two_in_two_out() -> keras.Model:
    image, vector = keras.Input((16, 16, 3), name="img"), keras.Input((8,), name="vec")
    x = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(4, 3, padding="same", activation="relu")(image))
    y = keras.layers.Dense(4)(vector)
    return keras.Model([image, vector], [keras.layers.Add(name="sum")([x, y]), keras.layers.Dense(2, name="head")(y)])


def _sequential() -> keras.Model:
    return keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Conv2D(8, 3, activation="relu"),
                             keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(4)])


def _frozen(model: keras.Model, path: Path) -> None:
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    specs = [tf.TensorSpec([1, *t.shape[1:]], tf.float32, name=t.name.split(":")[0]) for t in model.inputs]
    function = tf.function(lambda *xs: model(list(xs) if len(xs) > 1 else xs[0])).get_concrete_function(*specs)
    path.write_bytes(convert_variables_to_constants_v2(function).graph.as_graph_def().SerializeToString())


def _save(model: keras.Model, folder: Path, form: str) -> str:
    if form == "keras":
        model.save(folder / "m.keras")
        return "m.keras"
    if form == "h5":
        model.save(folder / "m.h5")
        return "m.h5"
    if form == "savedmodel":
        model.export(str(folder / "saved"), verbose=False)
        return "saved"
    _frozen(model, folder / "m.pb")
    return "m.pb"


def _feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


def _agrees_with_tensorflow(keras_model: keras.Model, imported: Path) -> float:
    """Max error of the imported model against the Keras model on the same inputs, relative to the range."""
    model = onnx.load(imported)
    feeds = _feeds(model)
    ours = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    names = [t.name.split(":")[0] for t in keras_model.inputs]
    values = [feeds[n] for n in names] if len(names) > 1 else list(feeds.values())  # one input: by position
    theirs = keras_model(values if len(names) > 1 else values[0], training=False)
    theirs = [np.asarray(t) for t in (theirs if isinstance(theirs, (list, tuple)) else [theirs])]
    assert [o.shape for o in ours] == [t.shape for t in theirs]
    return max(float(np.abs(a - b).max() / (np.abs(b).max() + 1e-12)) for a, b in zip(ours, theirs))


@pytest.mark.parametrize("form", ["keras", "h5", "savedmodel", "pb"])
def test_a_two_input_two_output_model_builds_from_every_format(tmp_path: Path, form: str) -> None:
    model = _two_in_two_out()
    path = _save(model, tmp_path, form)
    write(tmp_path / "p.yaml", f"accelbuild: 1\nbenchmark: {{frames: 20}}\nmodels:\n  - {{name: m, path: {path}}}\n")
    result = run_cli("run", "p.yaml", cwd=tmp_path)
    assert result.code == 0, result.stderr
    write(tmp_path / "npu.yaml", f"accelbuild: 1\ntarget: {{family: npu, platform: tda4vm}}\nbenchmark: {{frames: 20}}\n"
                                 f"models:\n  - {{name: m, path: {path}}}\n")
    assert run_cli("run", "npu.yaml", cwd=tmp_path).code == 0
    assert _agrees_with_tensorflow(model, tmp_path / "build/p/m/imported.onnx") < TOLERANCE
    record = json.loads((tmp_path / "build/p/m/import.json").read_text())["converted_by"]
    assert record["tensorflow"] == tf.__version__ and record["converter"] == "tf.lite.TFLiteConverter"
    imported = onnx.load(tmp_path / "build/p/m/imported.onnx")
    if form != "pb":  # the serving signature's names and order (a frozen graph has its Placeholders' names)
        assert [i.name for i in imported.graph.input] == ["img", "vec"]
        assert [o.name for o in imported.graph.output] == ["output_0", "output_1"]
    else:
        assert sorted(i.name for i in imported.graph.input) == ["img", "vec"]
    for chatter in ("Exception ignored", "oneDNN", "Saved artifact", "WARNING", "I0000", "W0000"):
        assert chatter not in result.stderr + result.stdout


def test_a_keras_hdf5_file_imports_like_h5(tmp_path: Path) -> None:
    """Keras writes HDF5 as .h5 or .hdf5 (ModelCheckpoint's examples use the latter): both are Keras models."""
    model = _sequential()
    model.save(tmp_path / "m.hdf5")
    write(tmp_path / "p.yaml", "accelbuild: 1\nmodels:\n  - {name: m, path: m.hdf5}\n")
    result = run_cli("run", "p.yaml", "--until", "import", cwd=tmp_path)
    assert result.code == 0, result.stderr
    record = json.loads((tmp_path / "build/p/m/import.json").read_text())
    assert record["source"] == {"file": "m.hdf5", "format": "keras"} and "keras" in record["converted_by"]
    assert _agrees_with_tensorflow(model, tmp_path / "build/p/m/imported.onnx") < TOLERANCE


@pytest.mark.parametrize("name, size", [("MobileNetV2", 64), ("ResNet50", 32), ("EfficientNetB0", 32)])
def test_keras_applications_build_on_mx3_and_npu(tmp_path: Path, name: str, size: int) -> None:
    model = getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3), classes=10)
    model.save(tmp_path / "m.keras")
    for family in ("mx3", "npu"):
        # (host code compiled by TVM is tests/targets/npu/test_host_code.py's; at 32x32 these run on the Arm)
        target = "{family: npu, platform: tda4vm, effort: lazy, offload: {host_compiler: onnx}}" if family == "npu" else \
            "{family: mx3, num_chips: min, effort: lazy}"
        write(tmp_path / f"{family}.yaml", f"accelbuild: 1\ntarget: {target}\nbenchmark: {{frames: 20}}\n"
                                           f"models:\n  - {{name: m, path: m.keras}}\n")
        result = run_cli("run", f"{family}.yaml", cwd=tmp_path)
        assert result.code == 0, result.stderr
        bench = json.loads((tmp_path / f"build/{family}/benchmark.json").read_text())
        assert bench["models"][0]["fps"] > 0
    assert _agrees_with_tensorflow(model, tmp_path / "build/mx3/m/imported.onnx") < TOLERANCE


def test_dynamic_spatial_dimensions_take_the_pipelines_input_shapes(tmp_path: Path) -> None:
    model = keras.Sequential([keras.Input((None, None, 3), name="img"), keras.layers.Conv2D(4, 3, padding="same")])
    model.save(tmp_path / "m.keras")
    write(tmp_path / "p.yaml", "accelbuild: 1\nmodels:\n  - path: m.keras\n")
    result = run_cli("run", "p.yaml", "--until", "import", cwd=tmp_path)
    assert result.code == 2 and "input 'img' has dynamic dimensions [?, ?, 3]; give its shape in input_shapes" \
        in result.stderr
    write(tmp_path / "p.yaml", "accelbuild: 1\nmodels:\n  - path: m.keras\n    input_shapes: {img: [24, 20, 3]}\n")
    result = run_cli("run", "p.yaml", "--until", "import", cwd=tmp_path)
    assert result.code == 0, result.stderr
    shape = onnx.load(tmp_path / "build/p/m/imported.onnx").graph.input[0].type.tensor_type.shape
    assert [d.dim_value for d in shape.dim] == [1, 24, 20, 3]


def test_bad_files_are_positioned_errors(tmp_path: Path) -> None:
    (tmp_path / "not.keras").write_bytes(b"PK\x03\x04 this is not a keras archive")
    plain = tf.Module()
    plain.v = tf.Variable(1.0)
    tf.saved_model.save(plain, str(tmp_path / "nosig"))
    graph = tf.Graph()
    with graph.as_default():
        tf.constant(1.0, name="c")
        tf.identity(tf.constant(2.0, name="d"), name="out")
    (tmp_path / "noinput.pb").write_bytes(graph.as_graph_def().SerializeToString())
    cases = {"not.keras": "not a Keras model Keras",
             "nosig": "the SavedModel has no 'serving_default' signature (it has: none)",
             "noinput.pb": "no input arrays found: a frozen graph's inputs are its Placeholder nodes"}
    for path, message in cases.items():
        write(tmp_path / "p.yaml", f"accelbuild: 1\nmodels:\n  - path: {path}\n")
        result = run_cli("run", "p.yaml", "--until", "import", cwd=tmp_path)
        assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
        assert f"p.yaml:3:11: {path}: {message}" in result.stderr, result.stderr


def test_the_converter_version_is_a_parameter_of_import(tmp_path: Path) -> None:
    """So a TensorFlow upgrade re-runs import (and never restores an old conversion from the cache)."""
    from accelbuild.config.load import load_pipeline
    from accelbuild.engine.plan import plan

    _sequential().save(tmp_path / "m.keras")
    write(tmp_path / "p.yaml", "accelbuild: 1\nmodels:\n  - path: m.keras\n")
    (job,) = [j for j in plan([load_pipeline(str(tmp_path / "p.yaml"))]) if j.stage == "import"]
    assert job.params_json["converter"] == f"tensorflow {tf.__version__}"
    assert run_cli("run", "p.yaml", "--until", "import", cwd=tmp_path).code == 0
    assert json.loads((tmp_path / "build/p/m/import.json").read_text())["converted_by"]["keras"] == keras.__version__


def test_a_conversion_is_kept_by_content_and_tensorflow_not_started_again(tmp_path: Path, monkeypatch) -> None:
    from accelbuild.frontends import tensorflow as frontend

    _sequential().save(tmp_path / "m.h5")
    cache = tmp_path / "conversions"
    with frontend.conversion_cache(cache):
        first, record = frontend.load_tensorflow(tmp_path / "m.h5", "keras")
    assert len(list(cache.glob("*.tflite"))) == 1
    monkeypatch.setattr(frontend, "_import_tensorflow", lambda path: pytest.fail("TensorFlow started again"))
    with frontend.conversion_cache(cache):
        again, record_again = frontend.load_tensorflow(tmp_path / "m.h5", "keras")
    assert again.SerializeToString() == first.SerializeToString() and record_again == record
    assert record["tensorflow"] == tf.__version__ and record["keras"] == keras.__version__
    monkeypatch.undo()
    _sequential().save(tmp_path / "m.h5")  # other weights: another key, converted anew
    with frontend.conversion_cache(cache):
        frontend.load_tensorflow(tmp_path / "m.h5", "keras")
    assert len(list(cache.glob("*.tflite"))) == 2
    assert frontend.conversion_key(tmp_path / "m.h5", "keras", ()) != frontend.conversion_key(
        tmp_path / "m.h5", "keras", {"x": [8, 8, 3]})  # the converter settings are part of the key


def test_tensors_twice_on_an_h5_converts_once(tmp_path: Path) -> None:
    _sequential().save(tmp_path / "m.h5")
    env = {"ACCELBUILD_STATE_DIR": str(tmp_path / "state")}
    first = run_cli("tensors", "m.h5", cwd=tmp_path, env=env)
    assert first.code == 0, first.stderr
    assert len(list((tmp_path / "state/tensorflow_conversions").glob("*.tflite"))) == 1
    second = run_cli("-v", "tensors", "m.h5", cwd=tmp_path, env=env)
    assert second.code == 0 and second.stdout == first.stdout and "TensorFlow" not in second.stderr  # described
    shutil.rmtree(tmp_path / "state/model_info")  # imported again: from the kept conversion
    third = run_cli("-v", "tensors", "m.h5", cwd=tmp_path, env=env)
    assert third.code == 0 and third.stdout == first.stdout
    assert "TensorFlow's conversion read from" in third.stderr and "TensorFlow said" not in third.stderr
