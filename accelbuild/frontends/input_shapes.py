"""Fix a model's input dimensions from the user's ``input_shapes``.

Users give image shapes channel-last without batch (H, W, C), whatever the model's layout. For a rank-4
input we decide whether the model reads it NCHW or NHWC (an NHWC input feeds a Transpose to NCHW, as
TensorFlow exports do; otherwise ONNX is NCHW), check the result against the dimensions the model fixes,
and prepend the batch. Inputs of other ranks are given as-is without batch. A symbolic batch becomes 1;
any other dimension left symbolic is an error naming the input and its dimensions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from accelbuild.config.schema_check import PIPELINE, did_you_mean, load_schema
from accelbuild.config.spec import InputShapes
from accelbuild.errors import ConfigError, ConfigErrors, InputFileError

if TYPE_CHECKING:
    import onnx

    from accelbuild.errors import Locator

Dim = int | str | None


class ShapeRequest(Protocol):
    """What the import stage asks for: the model's name (messages) and the pipeline's ``input_shapes``."""

    model: str
    input_shapes: InputShapes

# Elements in one tensor (1 GiB of float32). Far past any input an edge accelerator takes (an 8K RGB frame
# is 100 M); a larger shape is a mistake or a hostile file, refused before anything is allocated for it.
MAX_TENSOR_ELEMENTS = 1 << 28


def given_shape_problem(shape: object) -> str | None:
    """What the pipeline schema's ``shape`` rule says is wrong with an input shape given outside a pipeline
    file (``tensors``, ``init``, the library), or None. The bounds are read from the schema (its list branch of
    ``$defs/shape``), so the two cannot drift apart; jsonschema itself is not needed for them."""
    rule = next(b for b in load_schema(PIPELINE)["$defs"]["shape"]["oneOf"] if b.get("type") == "array")
    fewest, most = rule["minItems"], rule["maxItems"]
    low, high = rule["items"]["minimum"], rule["items"]["maximum"]
    if (not isinstance(shape, (list, tuple)) or not fewest <= len(shape) <= most
            or not all(isinstance(d, int) and not isinstance(d, bool) and low <= d <= high for d in shape)):
        return f"expected {fewest} to {most} whole numbers from {low} to {high}, got {shape!r}"
    return None


@dataclass(frozen=True)
class ResolvedInput:
    name: str
    shape: tuple[int, ...]
    layout: str  # "NCHW", "NHWC" or "as-is"


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Real inputs (old IR versions also list initializers as inputs)."""
    from accelbuild.util.onnx_graph import real_inputs  # onnx: not for looks_channel_first (init)

    return real_inputs(model.graph)


def model_dims(value: onnx.ValueInfoProto) -> list[Dim] | None:
    """Dimensions as ints (fixed), strings (symbolic) or None (unknown); None if the rank is unknown."""
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim
    ]


def show_dims(dims: Sequence[Dim]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def resolve_input_shapes(
    model: onnx.ModelProto, locate: Locator, spec: ShapeRequest
) -> list[ResolvedInput]:
    """Decide every input's static shape; raises positioned errors for the user's mistakes."""
    inputs = graph_inputs(model)
    given = _given_by_input(inputs, locate, spec)
    resolved = []
    for index, value in enumerate(inputs):
        at = _position(spec, spec.input_shapes, value.name, index)
        resolved.append(_resolve_one(model, value, given.get(value.name), locate, spec, at))
        size = math.prod(resolved[-1].shape)
        if size > MAX_TENSOR_ELEMENTS:
            raise ConfigError(
                locate(*at),
                f"input {value.name!r} of model {spec.model!r} would have {size:,} elements "
                f"{list(resolved[-1].shape)}; accelbuild handles at most {MAX_TENSOR_ELEMENTS:,} per tensor",
            )
    return resolved


def apply_input_shapes(model: onnx.ModelProto, resolved: list[ResolvedInput]) -> None:
    """Write static shapes into the model's inputs and drop stale intermediate shapes."""
    by_name = {r.name: r for r in resolved}
    for value in graph_inputs(model):
        shape = value.type.tensor_type.shape
        del shape.dim[:]
        for size in by_name[value.name].shape:
            shape.dim.add().dim_value = size
    del model.graph.value_info[:]  # re-inferred; old entries may hold conflicting symbolic dims
    for value in model.graph.output:  # keep the rank, forget symbolic sizes: inference fills them in
        if value.type.tensor_type.HasField("shape"):
            for dim in value.type.tensor_type.shape.dim:
                dim.Clear()


def _given_by_input(inputs: list[onnx.ValueInfoProto], locate: Locator,
                    spec: ShapeRequest) -> dict[str, object]:
    shapes = spec.input_shapes
    names = [v.name for v in inputs]
    if shapes.by_name:
        errors = []
        for name in shapes.by_name:
            if name not in names:
                where = locate("input_shapes", name, key=True)
                errors.append(ConfigError(
                    where,
                    f"model {spec.model!r} has no input named {name!r}{did_you_mean(name, names)} "
                    f"(its inputs: {', '.join(names)})",
                ))
        if errors:
            raise ConfigErrors(errors)
        return dict(shapes.by_name)
    if len(shapes.in_order) > len(names):
        where = locate("input_shapes")
        raise ConfigError(
            where, f"{len(shapes.in_order)} input shapes given, but model {spec.model!r} has "
            f"{len(names)} input(s): {', '.join(names)}",
        )
    return dict(zip(names, shapes.in_order))


def _position(spec: ShapeRequest, shapes: InputShapes, name: str, index: int) -> tuple[object, ...]:
    base: tuple[object, ...] = ("input_shapes",)
    if name in shapes.by_name:
        return base + (name,)
    if index < len(shapes.in_order):
        return base + (index,)
    return base if shapes.by_name or shapes.in_order else ()


def _resolve_one(model: onnx.ModelProto, value: onnx.ValueInfoProto, given: object,
                 locate: Locator, spec: ShapeRequest, at: tuple[object, ...]) -> ResolvedInput:
    dims = model_dims(value)
    name = value.name
    if given is None or given == "auto":
        if dims is None:
            raise ConfigError(locate(*at), f"input {name!r} of model {spec.model!r} has no shape "
                              "in the model; give it in input_shapes")
        fixed = [1 if i == 0 and len(dims) >= 2 and not isinstance(d, int) else d for i, d in enumerate(dims)]
        if any(d == 0 for d in fixed):
            raise ConfigError(locate(*at), _empty_input_message(model, name, spec.model, dims))
        if any(not isinstance(d, int) or d <= 0 for d in fixed):
            example = "[H, W, C]" if len(dims) == 4 else show_dims(["n"] * (len(dims) - 1))
            raise ConfigError(
                locate(*at),
                f"input {name!r} of model {spec.model!r} has dynamic dimensions {show_dims(dims)}; "
                f"give its shape in input_shapes (e.g. {name}: {example}, channel-last without batch)",
            )
        return ResolvedInput(name, tuple(int(d) for d in fixed), "as-is")  # type: ignore[arg-type]
    user = [int(d) for d in given]
    if dims is None:  # rank unknown to the model: take the user's dims after a batch of 1
        return ResolvedInput(name, (1, *user), "as-is")
    rank = len(dims)
    if rank <= 1:
        candidates = {"as-is": user}
        expected = rank
    else:
        expected = rank - 1
        batch = dims[0] if isinstance(dims[0], int) and dims[0] > 0 else 1
        if rank == 4 and len(user) == 3:
            h, w, c = user
            nchw, nhwc = [batch, c, h, w], [batch, h, w, c]
            candidates = {"NHWC": nhwc, "NCHW": nchw} if _feeds_nhwc_transpose(model, name) \
                else {"NCHW": nchw, "NHWC": nhwc}
        else:
            candidates = {"as-is": [batch, *user]}
    if len(user) != expected:
        what = "(H, W, C)" if rank == 4 else f"{expected} dimension(s)"
        raise ConfigError(
            locate(*at),
            f"input {name!r} of model {spec.model!r} has rank {rank} {show_dims(dims)}; "
            f"give {what} without the batch, not {len(user)} value(s)",
        )
    for layout, shape in candidates.items():
        if _fits(shape, dims):
            if layout == "NHWC" and _channel_first_given(user, dims, model, name):
                h, w, c = dims[2], dims[3], dims[1]
                raise ConfigError(
                    locate(*at),
                    f"input_shapes are channel-last (H, W, C): {user} reads as H={user[0]}, W={user[1]}, "
                    f"C={user[2]}, which fits input {name!r} of model {spec.model!r} {show_dims(dims)} only as "
                    f"NHWC; the model reads it channel-first, so you probably meant [{h}, {w}, {c}]",
                )
            return ResolvedInput(name, tuple(shape), layout)
    raise ConfigError(
        locate(*at),
        f"shape {user} does not fit input {name!r} of model {spec.model!r}, whose fixed dimensions "
        f"are {show_dims(dims)} (shapes are channel-last without batch)",
    )


def _empty_input_message(model: onnx.ModelProto, name: str, model_name: str, dims: list[Dim]) -> str:
    """Why an input with a static zero-size dimension is refused (no input_shapes value can fix it)."""
    message = (f"input {name!r} of model {model_name!r} is an empty tensor: the model fixes its shape to "
               f"{show_dims(dims)}, so it holds no values; accelbuild imports inputs that carry data")
    from accelbuild.util.onnx_graph import readers

    users = readers(model.graph, name)
    if not users:
        return message + " (and no node reads it: remove it from the model)"
    if all(n.op_type == "CastLike" and list(n.input).index(name) == 1 for n in users):
        nodes = ", ".join(repr(n.name or n.output[0]) for n in users)
        message += f" (it only gives CastLike {nodes} an element type: export a Cast to that type instead)"
    return message


def looks_channel_first(shape: list[Dim]) -> bool:
    """[N, C, H, W] with a colour-like C (1 to 4) and larger H and W (any batch N)."""
    return (len(shape) == 4 and all(isinstance(d, int) for d in shape[1:]) and 1 <= shape[1] <= 4  # type: ignore[operator]
            and shape[2] > 4 and shape[3] > 4)  # type: ignore[operator]


def _channel_first_given(user: list[int], dims: list[Dim], model: onnx.ModelProto, name: str) -> bool:
    """The user wrote the model's own [C, H, W] where (H, W, C) was asked, for an input that reads as an image
    in channel-first order and that no NHWC transpose reads: channel-first order given by mistake."""
    return (user == list(dims[1:]) and looks_channel_first(dims) and not _feeds_nhwc_transpose(model, name))


def _fits(shape: list[int], dims: list[Dim]) -> bool:
    return all(not isinstance(d, int) or d <= 0 or d == s for s, d in zip(shape, dims))


_PASS_THROUGH = {"Cast", "Identity"}


def _feeds_nhwc_transpose(model: onnx.ModelProto, name: str) -> bool:
    """Whether the input reaches a Transpose(perm=[0, 3, 1, 2]) directly or through Cast/Identity."""
    frontier = {name}
    for _ in range(4):
        consumers = [n for n in model.graph.node if frontier & set(n.input)]
        for node in consumers:
            if node.op_type == "Transpose":
                perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
                if perm == [0, 3, 1, 2]:
                    return True
        frontier = {o for n in consumers if n.op_type in _PASS_THROUGH for o in n.output}
        if not frontier:
            return False
    return False


def check_model_file_inputs(model: onnx.ModelProto, path: object) -> None:
    if not graph_inputs(model):
        raise InputFileError(path, "the model has no inputs")
    if not model.graph.output:  # it would import and crop, then fail in onnxruntime with no file named
        raise InputFileError(path, "the model has no outputs")
