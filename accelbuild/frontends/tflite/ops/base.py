"""The operator tables: one converter per TFLite builtin (:data:`OPS`) and per custom operator code
(:data:`CUSTOM_OPS`, for ``CUSTOM`` operators), with the support checks that guard it.

A check is a predicate ``(graph, op) -> (ok, reason)`` carrying its own documentation string; the same
text is the user's error message (the reason says what this op has) and a row of the generated
``docs/supported_ops.md`` (the doc says what is required). Converters run only after every check of
every operator passed, so they may rely on what the checks promise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from onnx import TensorProto

from accelbuild.frontends.tflite.graph import ACTIVATIONS, Graph
from accelbuild.frontends.tflite.reader import Operator
from accelbuild.frontends.tflite.tensors import is_quantized, onnx_type

COMPLEX_OPS = frozenset({"RFFT2D", "COMPLEX_ABS", "REAL", "IMAG"})  # the readers and writer of complex64 tensors
RESOURCE_OPS = frozenset({"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"})  # those of resource handles
Converter = Callable[[Graph, Operator], None]
Result = tuple[bool, str]
OK: Result = (True, "")


@dataclass(frozen=True)
class Check:
    """A documented support predicate."""

    doc: str
    predicate: Callable[[Graph, Operator], Result]

    def __call__(self, graph: Graph, op: Operator) -> Result:
        return self.predicate(graph, op)


@dataclass(frozen=True)
class OpSpec:
    name: str
    onnx: str  # what it becomes, for the docs
    convert: Converter
    checks: tuple[Check, ...]


OPS: dict[str, OpSpec] = {}
CUSTOM_OPS: dict[str, OpSpec] = {}  # custom_code of a CUSTOM operator -> its converter


def register(name: str, onnx: str, *checks: Check) -> Callable[[Converter], Converter]:
    """Decorator: add a converter and its checks to :data:`OPS`."""
    def wrap(convert: Converter) -> Converter:
        OPS[name] = OpSpec(name, onnx, convert, checks)
        return convert
    return wrap


def register_custom(custom_code: str, onnx: str, *checks: Check) -> Callable[[Converter], Converter]:
    """Decorator: add a converter for ``CUSTOM`` operators with this ``custom_code`` to :data:`CUSTOM_OPS`."""
    def wrap(convert: Converter) -> Converter:
        CUSTOM_OPS[custom_code] = OpSpec(custom_code, onnx, convert, checks)
        return convert
    return wrap


def spec_for(op: Operator) -> OpSpec | None:
    """The converter of a builtin operator, or of a ``CUSTOM`` one by its ``custom_code``; None if none."""
    return CUSTOM_OPS.get(op.custom_code) if op.name == "CUSTOM" else OPS.get(op.name)


def fail(reason: str) -> Result:
    return False, reason


# --------------------------------------------------------------------------- reusable checks


def const_inputs(*positions: int, what: str = "") -> Check:
    """Inputs at ``positions`` (when present) are constant tensors."""
    label = what or "input " + "/".join(str(p) for p in positions)
    plural = " and " in label

    def predicate(g: Graph, op: Operator) -> Result:
        for k in positions:
            if k < len(op.inputs) and op.inputs[k] >= 0 and g.const(op.inputs[k]) is None:
                return fail(f"{label} {'are not constant tensors' if plural else 'is not a constant tensor'}")
        return OK
    return Check(f"{label} {'are' if plural else 'is'} constant", predicate)


def input_count(low: int, high: int | None = None) -> Check:
    """Number of inputs (counting omitted optional ones) and at least ``low`` outputs present."""
    high = low if high is None else high
    text = f"{low}" if low == high else (f"{low} or more" if high > 64 else f"{low} to {high}")

    def predicate(g: Graph, op: Operator) -> Result:
        if not low <= len(op.inputs) <= high or any(i < 0 for i in op.inputs[:low]):
            return fail(f"expected {text} inputs, got {len(op.inputs)}")
        return OK if op.outputs else fail("operator has no output")
    return Check(f"{text} input{'s' if high > 1 else ''}", predicate)


def float_inputs(*positions: int, what: str) -> Check:
    """Inputs at ``positions`` (when present) hold real numbers: float or quantized integers."""
    def predicate(g: Graph, op: Operator) -> Result:
        for k in positions:
            if k < len(op.inputs) and op.inputs[k] >= 0 and onnx_type(g.tensor(op.inputs[k])) != TensorProto.FLOAT:
                return fail(f"{g.names[op.inputs[k]]!r} is an unquantized {g.tensor(op.inputs[k]).dtype} tensor")
        return OK
    return Check(f"{what} are float, float16 or quantized", predicate)


def input_rank(k: int, *ranks: int) -> Check:
    """Input ``k`` has one of the given ranks."""
    text = " or ".join(str(r) for r in ranks)

    def predicate(g: Graph, op: Operator) -> Result:
        rank = len(g.shape(op.inputs[k]))
        return OK if rank in ranks else fail(f"input {k} has rank {rank}, expected {text}")
    return Check(f"input {k} is {text}-D", predicate)


def positive_options(*names: str) -> Check:
    """Integer options that must be >= 1 (strides, dilations, window and block sizes)."""
    def predicate(g: Graph, op: Operator) -> Result:
        for name in names:
            if op.options.get(name, 1) < 1:
                return fail(f"option {name} is {op.options.get(name)}, expected >= 1")
        return OK
    return Check(", ".join(names) + " >= 1", predicate)


def output_shape(expected: Callable[[Graph, Operator], tuple[int, ...]], doc: str) -> Check:
    """The output tensor's static shape equals what the operator computes from its inputs."""
    def predicate(g: Graph, op: Operator) -> Result:
        want, have = tuple(expected(g, op)), g.shape(op.outputs[0])
        return OK if want == have else fail(f"output shape {list(have)} should be {list(want)}")
    return Check(doc, predicate)


SAME_SHAPE = output_shape(lambda g, op: g.shape(op.inputs[0]), "output shape equals the input shape")


def padding_known() -> Check:
    def predicate(g: Graph, op: Operator) -> Result:
        return OK if op.options.get("padding", 0) in (0, 1) else fail(f"unknown padding {op.options.get('padding')}")
    return Check("padding SAME or VALID", predicate)


# --------------------------------------------------------------------------- generic checks


def _tensor_types(g: Graph, op: Operator) -> Result:
    """Activations are float32, int32, int64, bool or quantized int8/uint8/int16 (with a scale), complex64
    between RFFT2D and its readers, resource handles between VAR_HANDLE and its readers; float16, float64 and sparse tensors only as constants."""
    for index in (*op.inputs, *op.outputs):
        if index < 0 or g.const(index) is not None:
            continue
        tensor = g.tensor(index)
        plain = tensor.dtype in ("FLOAT32", "INT32", "INT64", "BOOL") or \
            (tensor.dtype == "COMPLEX64" and op.name in COMPLEX_OPS) or \
            (tensor.dtype == "RESOURCE" and op.name in RESOURCE_OPS)
        if tensor.sparsity is None and (plain or is_quantized(tensor)):
            continue
        kind = "sparse " if tensor.sparsity is not None else ("unquantized " if tensor.dtype in
                                                               ("INT8", "UINT8", "INT16") else "")
        return fail(f"tensor {g.names[index]!r} is a {kind}{tensor.dtype} activation")
    return OK


def _static_shapes(g: Graph, op: Operator) -> Result:
    """Every tensor but a constant has a static shape without zero-sized dimensions."""
    for index in (*op.inputs, *op.outputs):
        if index >= 0 and 0 in g.shape(index) and g.const(index) is None:
            return fail(f"tensor {g.names[index]!r} has a zero-sized dimension {list(g.shape(index))}")
    return OK


def _fused_activation(g: Graph, op: Operator) -> Result:
    """A fused activation is NONE, RELU, RELU_N1_TO_1 or RELU6 (on a float result); TANH and SIGN_BIT
    convert to nothing, as the TFLite interpreter's kernels ignore them (a warning is logged)."""
    act = ACTIVATIONS.get(op.options.get("fused_activation_function", 0), "unknown")
    if act == "unknown":
        return fail(f"unknown fused activation {op.options.get('fused_activation_function')}")
    clamps = act in ("RELU", "RELU_N1_TO_1", "RELU6")
    if clamps and any(onnx_type(g.tensor(i)) != TensorProto.FLOAT for i in op.outputs):
        return fail(f"fused activation {act} on an integer result")
    return OK


# which input carries the data (and so the element type of the outputs), where it is not input 0
DATA_INPUT = {"SPLIT": 1, "TRANSPOSE_CONV": 2, "CONV_3D_TRANSPOSE": 2, "SELECT_V2": 1, "SELECT": 1, "FILL": 1, "EMBEDDING_LOOKUP": 1,
              "SCATTER_ND": 1, "ONE_HOT": 2, "SPARSE_TO_DENSE": 2, "EMBEDDING_LOOKUP_SPARSE": 4}
COMPARISONS = frozenset({"EQUAL", "NOT_EQUAL", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL"})
SAME_TYPE_INPUTS = frozenset({"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "PRELU", "CONCATENATION", "PACK",
                              "POW", "SQUARED_DIFFERENCE", "FLOOR_DIV", "FLOOR_MOD", "LOGICAL_AND", "LOGICAL_OR",
                              *COMPARISONS})
# their outputs' type is the op's own (BOOL, the shape's int type, the index type, the cast's target)
OWN_OUTPUT_TYPE = frozenset({"SHAPE", "CAST", "ARG_MAX", "ARG_MIN", "RANK", "TOPK_V2", "BUCKETIZE",
                             "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5", *COMPARISONS,
                             *COMPLEX_OPS, "READ_VARIABLE", "IF", "WHILE", "STABLEHLO_COMPOSITE"})


def _element_types(g: Graph, op: Operator) -> Result:
    """Outputs (and all inputs of element-wise ops and CONCATENATION) have the element type of the data
    input (quantized tensors count as float)."""
    k = DATA_INPUT.get(op.name, 0)
    if k >= len(op.inputs) or op.inputs[k] < 0:
        return OK
    want = onnx_type(g.tensor(op.inputs[k]))
    same = op.inputs if op.name in SAME_TYPE_INPUTS else ()
    outputs = () if op.name in OWN_OUTPUT_TYPE else op.outputs
    for index in (*same, *outputs):
        if onnx_type(g.tensor(index)) != want and op.name not in ("QUANTIZE", "DEQUANTIZE"):
            return fail(f"tensor {g.names[index]!r} is {g.tensor(index).dtype} but the data input is "
                        f"{g.tensor(op.inputs[k]).dtype}")
    return OK


def _doc_text(doc: str) -> str:
    """A docstring as one lower-case clause for the conditions list."""
    text = " ".join(doc.split()).rstrip(".")
    return text[:1].lower() + text[1:]


GENERIC_CHECKS: tuple[Check, ...] = tuple(
    Check(_doc_text(fn.__doc__ or ""), fn) for fn in (_tensor_types, _static_shapes, _fused_activation, _element_types)
)


def activation(op: Operator) -> str:
    return ACTIVATIONS[op.options.get("fused_activation_function", 0)]
