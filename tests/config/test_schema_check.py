
from accelbuild.commands.arguments import MAX_DIMENSION
from accelbuild.config import schema_doc
from accelbuild.config.schema_check import apply_defaults, load_schema, resolve_ref, validate
from accelbuild.config.yaml_source import parse_yaml
from accelbuild.frontends.input_shapes import MAX_TENSOR_ELEMENTS

from conftest import REPO

SCHEMA = "pipeline.schema.json"


def _properties(schema: dict, root: dict, path: str = ""):
    schema = resolve_ref(schema, root)
    for key, sub in schema.get("properties", {}).items():
        yield f"{path}{key}", sub
        yield from _properties(sub, root, f"{path}{key}.")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _properties(schema[key], root, f"{path}[]." if key == "items" else f"{path}*.")
    for sub in schema.get("oneOf", []):
        yield from _properties(sub, root, path)
    for rule in schema.get("allOf", []):  # a union keyed on a value: each branch's keys
        if "then" in rule:
            yield from _properties(rule["then"], root, path)


def _closed(schema: dict, root: dict) -> bool:
    """No unknown keys: the object itself, or every branch of its union, forbids them."""
    branches = [resolve_ref(rule["then"], root) for rule in schema.get("allOf", []) if "then" in rule]
    return schema.get("additionalProperties") is False or bool(branches) and all(
        b.get("additionalProperties") is False for b in branches)


def test_every_property_is_described_and_objects_are_closed() -> None:
    root = load_schema(SCHEMA)
    assert root["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    props = list(_properties(root, root))
    assert len(props) > 30
    for name, sub in props:
        assert resolve_ref(sub, root).get("description"), name
    for name, sub in props:
        sub = resolve_ref(sub, root)
        if "properties" in sub:
            assert _closed(sub, root), name


def test_repo_schema_link_is_the_packaged_file() -> None:
    assert (REPO / "schemas" / SCHEMA).read_text() == (REPO / "accelbuild" / "schemas" / SCHEMA).read_text()


def test_generated_reference_is_up_to_date() -> None:
    assert (REPO / "docs" / "pipeline-reference.md").read_text() == schema_doc.render()


def _messages(text: str) -> list[str]:
    return [str(e) for e in validate(parse_yaml(text, "p.yaml"), SCHEMA)]


def test_messages_point_at_the_node() -> None:
    text = "accelbuild: 2\ntarget:\n  num_chips: 0\n  effort: hrad\nmodels:\n  - path: m.onnx\n    extra: 1\n"
    assert _messages(text) == [
        "p.yaml:3:14: 0 is out of range: expected an integer >= 1 and <= 16",
        "p.yaml:4:11: 'hrad' is not one of 'lazy', 'normal', 'hard'; did you mean 'hard'?",
        "p.yaml:7:5: unknown key 'extra' in models.0",
    ]


def test_one_of_reports_the_branch_of_the_values_kind() -> None:
    text = "accelbuild: 2\nmodels:\n  - path: m.onnx\n    input_shapes: [[3, 0]]\n"
    assert _messages(text) == ["p.yaml:4:24: 0 is out of range: expected an integer >= 1 and <= 268435456"]
    text = "accelbuild: 2\nmodels:\n  - path: m.onnx\n    input_shapes: 5\n"
    assert _messages(text) == [
        "p.yaml:4:19: expected 'auto' or a mapping or a list, got 5",
    ]


def test_format_version_and_missing_keys() -> None:
    assert _messages("accelbuild: 3\nmodels: [{path: a.onnx}]\n") == [
        "p.yaml:1:13: unsupported config format 3; this accelbuild reads formats 1 and 2 (accelbuild: 2)"
    ]
    assert _messages("accelbuild: '1'\nmodels: [{path: a.onnx}]\n") == [
        "p.yaml:1:13: config format must be the number 1, not the string '1' (write accelbuild: 1 without quotes)"
    ]
    assert _messages("name: x\n") == [
        "p.yaml:1:1: missing required keys 'accelbuild', 'models' in the top level",
    ]


def test_defaults_come_from_the_schema() -> None:
    root = load_schema(SCHEMA)
    data = apply_defaults({"accelbuild": 2, "models": [{"path": "a.onnx"}]}, root, root)
    assert data["target"] == {
        "family": "mx3", "chip_gen": "mx3", "num_chips": 4, "effort": "normal", "target_fps": None,
        "input_format": "BF16", "output_format": "BF16", "share_input": False, "sim_dfp": False,
        "closed_loop": {"enabled": False, "jobs": 4, "keep_splits": False, "prioritize_model": -1},
    }
    assert data["models"][0]["quantize"] == {}  # its keys are the family's: config/load.py fills them in
    quantize = root["$defs"]["quantize_mx3"]
    assert apply_defaults({}, quantize, root) == {"weight_bits": 8, "auto_precision": False}
    assert data["benchmark"] == {"frames": 200, "host": True, "accuracy": {"samples": 4, "seed": 0, "warn_below": 0.98}}
    assert "closed_loop" not in data


def test_target_keys_depend_on_the_family() -> None:
    text = "accelbuild: 2\ntarget:\n  family: mx3\n  platform: tda4vm\nmodels:\n  - path: m.onnx\n"
    assert _messages(text)[0].startswith("p.yaml:4:3: unknown key 'platform' in target")
    text = "accelbuild: 2\ntarget:\n  num_chip: 2\nmodels:\n  - path: m.onnx\n"  # family mx3 by default
    assert _messages(text) == ["p.yaml:3:3: unknown key 'num_chip' in target; did you mean 'num_chips'?"]
    text = "accelbuild: 2\ntarget:\n  family: mx4\nmodels:\n  - path: m.onnx\n"
    assert _messages(text) == ["p.yaml:3:11: 'mx4' is not one of 'mx3', 'cpu', 'ethos-u', 'npu', 'qnn', 'rknn'; did you mean 'mx3'?"]


def test_defaults_come_from_the_family_branch() -> None:
    root = load_schema(SCHEMA)
    data = apply_defaults({"accelbuild": 2, "models": [{"path": "m.onnx"}]}, root, root)
    assert data["target"]["family"] == "mx3"
    assert data["target"]["chip_gen"] == "mx3" and data["target"]["num_chips"] == 4


def test_an_input_dimension_may_be_as_large_as_a_tensor_may_hold() -> None:
    """Seconds of 16 kHz audio are more than 65,536 samples: the cap is the per-tensor element limit, in the
    schema and in the CLI's --input-shape alike."""
    assert MAX_DIMENSION == MAX_TENSOR_ELEMENTS == load_schema(SCHEMA)["$defs"]["shape"]["oneOf"][0]["items"]["maximum"]
    assert _messages("accelbuild: 2\nmodels:\n  - path: m.onnx\n    input_shapes: {audio: [960000]}\n") == []
    assert _messages(f"accelbuild: 2\nmodels:\n  - path: m.onnx\n    input_shapes: [[{MAX_TENSOR_ELEMENTS + 1}]]\n") \
        == [f"p.yaml:4:21: {MAX_TENSOR_ELEMENTS + 1} is out of range: expected an integer >= 1 and <= {MAX_TENSOR_ELEMENTS}"]
