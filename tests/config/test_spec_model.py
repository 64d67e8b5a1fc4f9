"""The schema is the spec model: every key of a core section has a field, and no default is restated in Python."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import accelbuild
from accelbuild.config import schema_check
from accelbuild.config.spec import (
    AutoPrecision,
    BenchmarkSpec,
    CropSpec,
    DataParams,
    DataSettings,
    DeviceSpec,
    OutputSpec,
    QuantizeSpec,
    build,
    derived,
    key,
    uncovered,
    unknown_keys,
)
from accelbuild.families import get_target
from accelbuild.stages.params import ActivationSettings
from accelbuild.targets.cpu.spec import CpuTargetSpec
from accelbuild.targets.ethos_u.spec import EthosUTargetSpec
from accelbuild.targets.mx3.spec import ClosedLoopSpec, Mx3TargetSpec
from accelbuild.targets.npu.spec import NpuTargetSpec, OffloadSettings
from accelbuild.targets.qnn.spec import QnnTargetSpec
from accelbuild.targets.rknn.spec import RknnTargetSpec

PACKAGE = Path(accelbuild.__file__).parent
CORE = json.loads((PACKAGE / "schemas" / "pipeline_core.json").read_text(encoding="utf-8"))
FRAGMENTS = {path.parent.name: json.loads(path.read_text(encoding="utf-8"))
             for path in sorted((PACKAGE / "targets").glob("*/target.schema.json"))}
# where defaults could be restated: the typed spec, the stages' parameters, the families' specs and targets
PYTHON = [PACKAGE / "config" / "spec.py", PACKAGE / "config" / "load.py", PACKAGE / "stages" / "params.py",
          PACKAGE / "stages" / "declaration.py", PACKAGE / "stages" / "front.py",
          *sorted((PACKAGE / "targets").glob("*/spec.py")), *sorted((PACKAGE / "targets").glob("*/target.py"))]
# (file, key): why a fallback equal to the key's default is not a restated default
NOT_DEFAULTS = {
    ("config/load.py", "quantize"): "merging what the user wrote of target.quantize and models[].quantize, "
                                    "before defaults are filled in (a filled-in model default would win)",
}


def _core(*path: str) -> dict[str, Any]:
    node: Any = CORE
    for part in path:
        node = schema_check.resolve_ref(node[part], CORE)
    return node


def _resolve(schema: dict[str, Any]) -> Any:
    return lambda node: schema_check.resolve_ref(node, schema)


def _auto_precision_object() -> dict[str, Any]:
    branches = _core("$defs", "quantize_stage", "properties", "auto_precision")["oneOf"]
    return next(b for b in branches if b.get("type") == "object")


CORE_SECTIONS = {
    "benchmark": ((BenchmarkSpec,), _core("properties", "benchmark")),
    "benchmark.device": ((DeviceSpec,), _core("properties", "benchmark", "properties", "device")),
    "models[].crop": ((CropSpec,), _core("$defs", "model", "properties", "crop")),
    "models[].data": ((DataSettings, DataParams), _core("$defs", "model", "properties", "data")),
    "models[].quantize": ((QuantizeSpec,), _core("$defs", "quantize_stage")),
    "models[].quantize.auto_precision": ((AutoPrecision,), _auto_precision_object()),
    "output": ((OutputSpec,), _core("properties", "output")),
}


@pytest.mark.parametrize("section", sorted(CORE_SECTIONS))
def test_every_key_of_a_core_section_has_a_field_and_every_field_a_key(section: str) -> None:
    classes, schema = CORE_SECTIONS[section]
    assert uncovered(classes, schema, _resolve(CORE)) == []
    assert unknown_keys(classes, schema, _resolve(CORE)) == []


@pytest.mark.parametrize("family, spec, section", [
    ("cpu", CpuTargetSpec, ()), ("ethos_u", EthosUTargetSpec, ()), ("mx3", Mx3TargetSpec, ()),
    ("mx3", ClosedLoopSpec, ("closed_loop",)), ("npu", NpuTargetSpec, ()), ("npu", OffloadSettings, ("offload",)),
    ("qnn", QnnTargetSpec, ()), ("rknn", RknnTargetSpec, ())])
def test_a_family_target_spec_built_by_key_covers_its_target_section(family: str, spec: type,
                                                                     section: tuple[str, ...]) -> None:
    fragment = FRAGMENTS[family]
    schema = fragment["target"]
    for part in section:
        schema = schema["properties"][part]
    assert uncovered((spec,), schema, _resolve(fragment)) == []
    assert unknown_keys((spec,), schema, _resolve(fragment)) == []


@pytest.mark.parametrize("family", [f for f in FRAGMENTS if "calibration" in FRAGMENTS[f].get("quantize", {})
                                    .get("properties", {})])
def test_a_family_quantize_keys_are_its_quantize_settings(family: str) -> None:
    """Each key of a family's quantize section is a field of the dataclass the family declares for it (a new
    key: a field of the family's own subclass of ``ActivationSettings``, in its package)."""
    fragment = FRAGMENTS[family]
    settings = get_target(family.replace("_", "-")).quantize_settings
    assert settings is not None and issubclass(settings, ActivationSettings)
    assert uncovered((settings,), fragment["quantize"], _resolve(fragment)) == []


def test_a_new_schema_key_without_a_field_is_reported() -> None:
    schema = json.loads(json.dumps(_core("properties", "benchmark")))
    schema["properties"]["accuracy"]["properties"]["new_key"] = {"type": "integer", "default": 1}
    schema["properties"]["other"] = {"type": "integer"}
    assert uncovered((BenchmarkSpec,), schema, _resolve(CORE)) == ["accuracy.new_key", "other"]


def test_a_field_naming_no_schema_key_is_reported() -> None:
    @dataclass(frozen=True)
    class Wrong:
        resource: str
        farm: str = field(metadata=key("far"))

    assert unknown_keys((Wrong,), _core("properties", "benchmark", "properties", "device"), _resolve(CORE)) \
        == ["far (Wrong.farm)"]


def test_build_takes_each_field_from_its_key_and_needs_derived_fields() -> None:
    data = {"frames": 7, "host": False, "accuracy": {"samples": 2, "seed": 5, "warn_below": 0.5}}
    bench = build(BenchmarkSpec, data, data=None, device=None)
    assert (bench.frames, bench.host, bench.samples, bench.seed, bench.data_text, bench.warn_below) == \
        (7, False, 2, 5, None, 0.5)

    @dataclass(frozen=True)
    class Resolved:
        path: Path = field(metadata=derived("path", "resolved"))

    with pytest.raises(TypeError, match="Resolved.path is derived"):
        build(Resolved, {"path": "x"})


def _schema_defaults() -> dict[str, list[str]]:
    """Each key name of the schema (core and every family's fragment) with the defaults it has, as JSON."""
    found: dict[str, list[str]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                if isinstance(sub, dict) and "default" in sub:
                    found.setdefault(name, []).append(json.dumps(sub["default"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for schema in (CORE, *FRAGMENTS.values()):
        walk(schema)
    return found


def _literal(node: ast.expr) -> str | None:
    try:
        return json.dumps(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError):
        return None


def _restated(path: Path, defaults: dict[str, list[str]]) -> list[str]:
    """Dataclass field defaults and ``.get(key, default)`` fallbacks equal to the schema's default of that key."""
    shown = path.relative_to(PACKAGE).as_posix() if path.is_relative_to(PACKAGE) else path.name
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        pairs: list[tuple[str, ast.expr]] = []
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "field":
                value = next((k.value for k in value.keywords if k.arg == "default"), None)  # type: ignore[assignment]
            if value is not None:
                pairs.append((node.target.id, value))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and len(node.args) == 2 and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            pairs.append((node.args[0].value, node.args[1]))
        for name, value in pairs:
            literal = _literal(value)
            if literal is not None and literal in defaults.get(name, []) and (shown, name) not in NOT_DEFAULTS:
                found.append(f"{shown}:{value.lineno}: {name} = {literal}")
    return found


def test_no_schema_default_is_restated_in_python() -> None:
    defaults = _schema_defaults()
    assert defaults["warn_below"] == ["0.98"] and defaults["min_cosine"] == ["0.99"]
    assert [line for path in PYTHON for line in _restated(path, defaults)] == []


def test_a_restated_default_is_found(tmp_path: Path) -> None:
    module = tmp_path / "restated.py"
    module.write_text("from dataclasses import dataclass, field\n\n@dataclass\nclass B:\n    frames: int = 200\n"
                      "    host: bool = field(default=True)\n    seed: int = 1\n\n"
                      "def f(d):\n    return d.get('min_cosine', 0.99), d.get('samples', 5)\n", encoding="utf-8")
    found = [line.split(": ", 1)[1] for line in _restated(module, _schema_defaults())]
    assert found == ["frames = 200", "host = true", "min_cosine = 0.99"]
