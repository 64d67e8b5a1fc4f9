"""Load pipeline YAML files into typed specs: parse, validate against the schema, check, resolve.

Every problem is a ``ConfigError`` at the offending node; all problems of a file are reported together.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from accelbuild.config import compose, formats, schema_check
from accelbuild.config import validated as validated_module
from accelbuild.config.schema_assembly import quantize_definition
from accelbuild.config.spec import (
    MODEL_FORMATS,
    SAVED_MODEL,
    AutoPrecision,
    BenchmarkSpec,
    CropSpec,
    DataParams,
    DataSettings,
    DeviceSpec,
    InputShapes,
    ModelSpec,
    OutputSpec,
    PipelineSpec,
    QuantizeSpec,
    Shape,
    build,
)
from accelbuild.config.validated import ValidatedConfigs
from accelbuild.config.yaml_source import load_yaml
from accelbuild.errors import ConfigError, ConfigErrors, Where
from accelbuild.families import DEFAULT as DEFAULT_FAMILY
from accelbuild.families import family as registered_family

SCHEMA = "pipeline.schema.json"



def load_pipelines(paths: Iterable[str], validated: ValidatedConfigs | None = None) -> list[PipelineSpec]:
    """Load several pipeline files (a matrix file gives one spec per variant); also checks that names
    and output folders do not collide. ``validated``: configs that passed the schema before, not validated
    again (the record is saved when every file loaded)."""
    specs: list[PipelineSpec] = []
    errors: list[ConfigError] = []
    validated_module.current = validated
    try:
        for path in paths:
            try:
                specs.extend(load_file(path))
            except ConfigErrors as exc:
                errors.extend(exc.errors)
            except ConfigError as exc:
                errors.append(exc)
    finally:
        validated_module.current = None
    errors.extend(_cross_pipeline_errors(specs))
    if errors:
        raise ConfigErrors(errors)
    if validated is not None:
        validated.save()
    return specs


def load_pipeline(path: str) -> PipelineSpec:
    """Load and check one pipeline file without a matrix (``path`` as the user typed it)."""
    specs = load_file(path)
    if len(specs) != 1:
        raise ConfigError(path, f"this file has a matrix of {len(specs)} variants; expected one pipeline")
    return specs[0]


def load_file(path: str) -> list[PipelineSpec]:
    """Load and check one pipeline file: one spec, or one per ``matrix`` variant. ``extends`` chains are
    merged first; every message points into the file that holds the value."""
    doc = load_yaml(Path(path), shown=path)
    if doc.data is None:
        raise ConfigError(Where(path, 1, 1), "empty pipeline file; expected a mapping starting with 'accelbuild: 2'")
    if not isinstance(doc.data, dict):
        where = doc.where(())
        raise ConfigError(where, "a pipeline file must be a mapping starting with 'accelbuild: 2'", doc.snippet(where))
    if "extends" not in doc.data and "matrix" not in doc.data and not _may_move(doc.data):
        return [_spec(doc, Path(path), None)]
    node, docs = compose.load_chain(Path(path), path)
    formats.upgrade(node, docs)
    variants = compose.expand_matrix(node, docs, path, matrix_key_path)
    if variants is None:
        return [_spec(compose.compose(node, docs, path), Path(path), None)]
    specs, errors = [], []
    for variant in variants:
        try:
            specs.append(_spec(variant.document, Path(path), variant.name))
        except ConfigErrors as exc:
            errors.extend(e for e in exc.errors if str(e) not in {str(x) for x in errors})
    if errors:
        raise ConfigErrors(errors)
    return specs


def _may_move(data: dict[str, Any]) -> bool:
    """Whether a file without extends or matrix holds keys that are not format 2's (to move, or to refuse)."""
    return formats.is_format1(data) or any(key not in formats.core_keys() for key in data)


def load_generated(path: Path) -> PipelineSpec:
    """A one-model pipeline accelbuild wrote itself (``tensors`` and ``init`` reading a model, ``init`` checking
    the pipeline it writes): parsed and checked like any other but for the JSON Schema, which its keys meet by
    construction; the user's values in it are checked by the caller (input shapes:
    ``frontends.input_shapes.given_shape_problem``) or by the checks that still run (paths, a platform).
    Such a command does not import jsonschema (30 ms)."""
    doc = load_yaml(path, shown=str(path))
    return _spec(doc, path, None, schema_valid=True)


def _spec(doc: Any, yaml_path: Path, variant: str | None, schema_valid: bool = False) -> PipelineSpec:
    root = schema_check.load_schema(SCHEMA)
    record = validated_module.current
    key = record.key(doc.data, root) if record is not None else None
    if not schema_valid and (key is None or not record.seen(key)):  # type: ignore[union-attr]
        errors = schema_check.validate(doc, SCHEMA) or _quantize_errors(doc, root)
        if errors:
            raise ConfigErrors(errors)
    data = _with_quantize(_plain_copy(doc.data), root)
    checker = _Checker(doc, yaml_path.resolve().parent)
    spec = checker.build(data, yaml_path, variant)
    if checker.errors:  # once each: a target.quantize value is every model's
        unique = list({str(e): e for e in checker.errors}.values())
        raise ConfigErrors(sorted(unique, key=lambda e: (str(e.where.file), e.where.line, e.where.col)))
    if key is not None:
        record.add(key)  # type: ignore[union-attr]
    return spec


def _family_quantize(data: Any, root: dict[str, Any]) -> dict[str, Any]:
    """The schema of the quantize sections of the pipeline's family (``target.quantize``'s)."""
    target = data.get("target") if isinstance(data, dict) else None
    family = target.get("family") if isinstance(target, dict) else None
    return root["$defs"][quantize_definition(family if isinstance(family, str) else DEFAULT_FAMILY)]


def _quantize_errors(doc: Any, root: dict[str, Any]) -> list[ConfigError]:
    """``models[].quantize`` against its family's section (the schema's ``target.quantize`` has checked the
    family is known)."""
    section = _family_quantize(doc.data, root)
    errors = []
    for index, model in enumerate(doc.data["models"]):
        if "quantize" in model:
            at = ("models", index, "quantize")
            errors += [_owners(e, model["quantize"], section, root)
                       for e in schema_check.validate_at(doc, at, section, root)]
    return errors


def _owners(error: ConfigError, given: dict[str, Any], section: dict[str, Any], root: dict[str, Any]) -> ConfigError:
    """An unknown key that other families' quantize sections have: say which (the key is theirs)."""
    unknown = [k for k in given if k not in section["properties"]]
    if not unknown or not error.message.startswith(f"unknown key {unknown[0]!r}"):
        return error
    owners = [name.removeprefix("quantize_").replace("_", "-") for name, sub in root["$defs"].items()
              if name.startswith("quantize_") and unknown[0] in sub.get("properties", {})]
    if not owners:
        return error
    mine = section["description"].split(":")[0].removeprefix("Quantization settings of ")
    return ConfigError(error.where, f"{error.message}: a key of family {', '.join(owners)}, not of {mine}",
                       error.snippet)


def _with_quantize(data: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """Defaults filled in, each model's quantize section over ``target.quantize`` (key by key) first."""
    section = _family_quantize(data, root)
    shared = (data.get("target") or {}).get("quantize", {})
    for model in data["models"]:
        model["quantize"] = {**shared, **model.get("quantize", {})}
    data = schema_check.apply_defaults(data, root, root)
    for model in data["models"]:
        model["quantize"] = schema_check.apply_defaults(model["quantize"], section, root)
    return data


def matrix_key_path(dotted: str, where: Where, doc: Any) -> tuple[str | int, ...]:
    """The data path a matrix key names (``models.det.quantize.weight_bits`` -> ("models", 0, ...)),
    checked against the schema; a key that names no field is an error at the key."""
    root = schema_check.load_schema(SCHEMA)
    schema: dict[str, Any] = root
    data: Any = doc.data
    path: list[str | int] = []
    parts = dotted.split(".")
    i = 0
    while i < len(parts):
        part = parts[i]
        if path == ["models"]:
            models = data if isinstance(data, list) else []
            names = [compose._model_key(compose._annotate(m, "", ())) for m in models]
            if part not in names:
                raise ConfigError(where, f"matrix key {dotted!r}: no model named {part!r} "
                                         f"(models: {', '.join(n for n in names if n)})"
                                         f"{schema_check.did_you_mean(part, [n for n in names if n])}",
                                  doc.snippet(where))
            index = names.index(part)
            path.append(index)
            data = models[index]
            schema = schema_check.resolve_ref(schema.get("items", {}), root)
            i += 1
            continue
        properties = _properties_of(schema, data, root)
        if part not in properties:
            raise ConfigError(where, f"matrix key {dotted!r} names no field: no key {part!r} in "
                                     f"{'.'.join(map(str, path)) or 'the pipeline'}"
                                     f"{schema_check.did_you_mean(part, list(properties))}", doc.snippet(where))
        path.append(part)
        schema = schema_check.resolve_ref(properties[part], root)
        if len(path) == 3 and path[0] == "models" and part == "quantize":  # the family's keys
            schema = _family_quantize(doc.data, root)
        data = data.get(part) if isinstance(data, dict) else None
        i += 1
    if path[:1] == ["models"] and len(path) < 3:
        raise ConfigError(where, f"matrix key {dotted!r} must name a field of a model, e.g. "
                                 f"models.{parts[1] if len(parts) > 1 else 'NAME'}.quantize.weight_bits",
                          doc.snippet(where))
    if path[0] in ("matrix", "extends", "name", "accelbuild"):
        raise ConfigError(where, f"matrix key {dotted!r}: {path[0]} cannot vary in a matrix", doc.snippet(where))
    return tuple(path)


def _properties_of(schema: dict[str, Any], data: Any, root: dict[str, Any]) -> dict[str, Any]:
    """The keys a mapping may hold: its own properties, plus those of its union branch (target.family)."""
    properties = dict(schema.get("properties", {}))
    for rule in schema.get("allOf", []):
        if "if" in rule and schema_check.matches(rule["if"], data if isinstance(data, dict) else {}, root):
            properties.update(schema_check.resolve_ref(rule.get("then", {}), root).get("properties", {}))
    return properties


def _plain_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_copy(v) for v in value]
    return value


def _cross_pipeline_errors(specs: list[PipelineSpec]) -> list[ConfigError]:
    errors = []
    by_name: dict[str, PipelineSpec] = {}
    by_dir: dict[Path, PipelineSpec] = {}
    for spec in specs:
        other = by_name.setdefault(spec.name, spec)
        if other is not spec:
            errors.append(ConfigError(
                spec.where("name"),
                f"pipeline name {spec.name!r} is also used by {other.source.file}; names must be unique in one run",
            ))
        other = by_dir.setdefault(spec.output.dir, spec)
        if other is not spec:
            errors.append(ConfigError(
                spec.where("output", "dir"),
                f"output folder {spec.output.dir} is also used by {other.source.file}",
            ))
    return errors


class _Checker:
    """Builds the spec from schema-valid data, collecting the errors the schema cannot express."""

    def __init__(self, doc: Any, base: Path) -> None:
        self.doc = doc
        self.base = base
        self.errors: list[ConfigError] = []
        self.family: Any = None  # the pipeline's family (``Target``), once known

    def error(self, path: tuple[Any, ...], message: str, *, key: bool = False) -> None:
        path = self.written_at(path)
        where = self.doc.where(path, key=key)
        self.errors.append(ConfigError(where, message, self.doc.snippet(where)))

    def written_at(self, path: tuple[Any, ...]) -> tuple[Any, ...]:
        """Where the value at ``path`` is written: a model's quantize key may come from ``target.quantize``."""
        if len(path) > 3 and path[0] == "models" and path[2] == "quantize" and not self.doc.has_value(path):
            shared = ("target", "quantize", *path[3:])
            if self.doc.has_value(shared):
                return shared
        return path

    def written(self, path: tuple[Any, ...]) -> bool:
        """Whether the user wrote the value at ``path`` (not a default)."""
        return bool(self.doc.has_value(self.written_at(path)))

    def existing(self, path: tuple[Any, ...], value: str, *, folder: bool = False) -> Path:
        """Resolve a user path against the YAML's folder; report it when it does not exist."""
        resolved = Path(os.path.normpath(self.folder_of(path) / value))
        kind = "folder" if folder else "file"
        if not resolved.exists():
            self.error(path, f"{kind} not found: {value} (looked for {resolved})")
        elif folder and not resolved.is_dir():
            self.error(path, f"expected a folder, but {value} is a file")
        elif not folder and not resolved.is_file():
            self.error(path, f"expected a file, but {value} is not a regular file")
        return resolved

    def folder_of(self, path: tuple[Any, ...]) -> Path:
        """The folder relative paths at ``path`` resolve against: that of the file that wrote the value."""
        if isinstance(self.doc, compose.ComposedDocument):
            return Path(os.path.abspath(self.doc.folder_of(path)))
        return self.base

    def build(self, data: dict[str, Any], yaml_path: Path, variant: str | None = None) -> PipelineSpec:
        base_name = data.get("name") or _safe_stem(yaml_path)
        name = f"{base_name}[{variant}]" if variant else base_name
        family = registered_family(data["target"]["family"]).target
        self.family = family
        target = family.target_spec(data["target"], self)
        models = tuple(self.model(i, m) for i, m in enumerate(data["models"]))
        self.unique_model_names(models)
        out = data["output"]
        out_base = self.folder_of(("output", "dir")) if "dir" in out else self.base
        out_dir = Path(os.path.normpath(out_base / out.get("dir", f"build/{base_name}")))
        if out_dir == out_base or out_dir in out_base.parents:
            self.error(("output", "dir"), "output.dir must be a folder of its own, not the YAML's folder or above it")
        else:
            problem = _unusable_output_dir(out_dir)
            if problem:
                shown = out.get("dir", f"build/{base_name}")
                self.error(("output", "dir") if "dir" in out else ("name",) if "name" in data else (),
                           f"output folder {shown} cannot be used: {problem}")
        bench = data["benchmark"]
        accuracy = bench["accuracy"]
        data_dir = None
        if "data" in accuracy:
            data_dir = self.existing(("benchmark", "accuracy", "data"), accuracy["data"], folder=True)
        spec = PipelineSpec(
            name=name,
            yaml_path=yaml_path.resolve(),
            target=target,
            models=models,
            benchmark=build(BenchmarkSpec, bench, data=data_dir, device=self.device(bench.get("device"), family)),
            output=build(OutputSpec, out, dir=out_dir / variant if variant else out_dir),
            source=self.doc,
            checks=dict(data["checks"]),
            variant=variant,
            base_name=base_name,
            target_impl=family,
            toolchain_ref=family.toolchain_ref(target, self) if family.toolchain is not None else None,
        )
        family.check_pipeline(spec, self)
        offered = registered_family(spec.target.family).checks
        for check in spec.checks:
            if check not in offered:
                self.error(("checks", check), f"check {check} does not apply to family {spec.target.family}: "
                                              f"its builds have no such figure (checks here: "
                                              f"{', '.join(sorted(offered))})", key=True)
        return spec

    def device(self, d: dict[str, Any] | None, family: Any) -> DeviceSpec | None:
        """``benchmark.device``, for a family that can run its builds on a device (``Target.device_runtime``)."""
        if d is None:
            return None
        if family.device_runtime is None:
            self.error(("benchmark", "device"), f"family {family.family} has no device runtime "
                                                f"({family.no_device_runtime}); "
                                                "remove benchmark.device", key=True)
        return build(DeviceSpec, d, farm=d.get("farm", "").rstrip("/") or None)

    def model(self, index: int, m: dict[str, Any]) -> ModelSpec:
        at = ("models", index)
        saved_model = Path(os.path.normpath(self.folder_of(at + ("path",)) / m["path"])) / SAVED_MODEL
        if saved_model.is_file():  # a SavedModel folder: its graph file stands for it (the stage reads the folder)
            path, suffix, fmt = saved_model, "", "savedmodel"
        else:
            path = self.existing(at + ("path",), m["path"])
            suffix = Path(m["path"]).suffix.lower()
            fmt = MODEL_FORMATS.get(suffix)
        if fmt is None:
            self.error(
                at + ("path",),
                f"unsupported model file type {suffix or '(none)'!r}; expected one of {', '.join(MODEL_FORMATS)} "
                f"or a SavedModel folder",
            )
            fmt = "onnx"
        return ModelSpec(
            index=index,
            name=m.get("name") or _safe_stem(Path(m["path"])),
            path=path,
            path_text=m["path"],
            format=fmt,  # type: ignore[arg-type]
            input_shapes=self.input_shapes(at + ("input_shapes",), m["input_shapes"]),
            crop=self.crop(at + ("crop",), m.get("crop")),
            quantize=self.quantize(at + ("quantize",), m["quantize"]),
            data=self.data(at + ("data",), m.get("data")),
        )

    def data(self, at: tuple[Any, ...], d: dict[str, Any] | None) -> DataSettings | None:
        if d is None:
            return None
        folder = self.existing(at + ("path",), d["path"], folder=True)
        pre = d["preprocess"]
        channels = 1 if pre["color"] == "gray" else 3
        for key in ("mean", "std"):
            if len(pre[key]) not in (1, channels):
                self.error(at + ("preprocess", key), f"{key} needs 1 or {channels} value(s) for color "
                                                     f"{pre['color']}, not {len(pre[key])}")
        return build(DataSettings, d, path=folder, params=build(DataParams, d))

    def input_shapes(self, at: tuple[Any, ...], value: Any) -> InputShapes:
        def shape(v: Any) -> Shape:
            return "auto" if v == "auto" else tuple(v)

        if value == "auto":
            return InputShapes()
        if isinstance(value, dict):
            for name in value:
                if not name.strip():
                    self.error(at + (name,), "input name must not be blank", key=True)
            return InputShapes(by_name={k: shape(v) for k, v in value.items()})
        return InputShapes(in_order=tuple(shape(v) for v in value))

    def crop(self, at: tuple[Any, ...], c: dict[str, Any] | None) -> CropSpec:
        if not c:
            return build(CropSpec, _section_defaults(("$defs", "model", "properties", "crop")), in_out_file=None)
        keys_of_way = {
            "inputs/outputs": [k for k in ("inputs", "outputs") if k in c],
            "auto": ["auto"] if c.get("auto") else [],
            "in_out_file": ["in_out_file"] if "in_out_file" in c else [],
        }
        ways = [way for way, keys in keys_of_way.items() if keys]
        if len(ways) > 1:
            # point at the way that comes second in the file: the first one is fine on its own
            firsts = sorted((self.doc.where(at + (keys_of_way[w][0],), key=True), w) for w in ways)
            second_key = keys_of_way[firsts[1][1]][0]
            self.error(at + (second_key,), f"crop: choose one way of cropping, not {' and '.join(ways)}", key=True)
        in_out = self.existing(at + ("in_out_file",), c["in_out_file"]) if "in_out_file" in c else None
        return build(CropSpec, c, in_out_file=in_out)

    def quantize(self, at: tuple[Any, ...], q: dict[str, Any]) -> QuantizeSpec:
        if "bits" in q and "bits_file" in q:
            self.error(at + ("bits_file",), "give per-layer bits either inline (bits) or in a file (bits_file), not both", key=True)
        if q["auto_precision"] is not False and ("bits" in q or "bits_file" in q):
            other = "bits" if "bits" in q else "bits_file"
            self.error(
                at + ("auto_precision",),
                f"auto_precision chooses per-layer bits itself; it cannot be combined with {other}",
                key=True,
            )
        bits_file = self.existing(at + ("bits_file",), q["bits_file"]) if "bits_file" in q else None
        own = self.family.quantize_spec(q, at, self)
        return build(QuantizeSpec, q, bits_file=bits_file,
                     auto_precision=self.auto_precision(q["auto_precision"]), own=own)

    def auto_precision(self, value: bool | dict[str, Any]) -> AutoPrecision | None:
        """``auto_precision``: false, true (the schema's default goal) or ``{min_cosine, max_extra_bytes}``."""
        if value is False:
            return None
        root = schema_check.load_schema(SCHEMA)
        section = root["$defs"][quantize_definition(self.family.family)]
        branches = schema_check.resolve_ref(section["properties"]["auto_precision"], root)["oneOf"]
        mapping = next(b for b in branches if b.get("type") == "object")
        given = {} if value is True else dict(value)
        return build(AutoPrecision, schema_check.apply_defaults(given, mapping, root))

    def unique_model_names(self, models: tuple[ModelSpec, ...]) -> None:
        seen: dict[str, int] = {}
        for model in models:
            if model.name in seen:
                at = ("models", model.index, "name")
                if not self.doc.has_value(at):
                    at = ("models", model.index)
                self.error(
                    at,
                    f"model name {model.name!r} is already used by models[{seen[model.name]}]; "
                    "give each model a unique name",
                )
            else:
                seen[model.name] = model.index


def _section_defaults(path: tuple[str, ...]) -> dict[str, Any]:
    """An absent section as its schema's defaults fill it in (``path``: the section in the schema)."""
    root = schema_check.load_schema(SCHEMA)
    section: Any = root
    for part in path:
        section = schema_check.resolve_ref(section[part], root)
    return schema_check.apply_defaults({}, section, root)  # type: ignore[no-any-return]


def _safe_stem(path: Path) -> str:
    """A file stem usable as a default name (same pattern as the schema's names)."""
    stem = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in path.stem)
    return stem.lstrip("._-") or "model"


def _unusable_output_dir(folder: Path) -> str | None:
    """Why ``folder`` cannot hold build outputs (it, or a folder above it, is a file, or the nearest existing
    folder above it cannot be written), or None."""
    if folder.is_dir():
        return None if os.access(folder, os.W_OK | os.X_OK) else "it is not writable"
    if folder.exists():
        return "it is a file; output.dir must name a folder"
    for parent in folder.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"{parent.name} above it is a file, not a folder"
            if not os.access(parent, os.W_OK | os.X_OK):
                return f"it would be created in {parent}, which is not writable"
            return None
    return None
