"""A driver for the protocol tests: it runs in the toolchain's interpreter and reports what it sees there."""

import sys

from toolchain_runtime import Refusal


def where(request):
    import six  # installed in the toolchain from its pins

    return {"prefix": sys.prefix, "six": six.__version__, "echo": request["echo"],
            "accelbuild_importable": _importable("accelbuild")}


def refuse(request):
    raise Refusal("E build: Unsupported op 'Frobnicate' at node frob_1 (the vendor's own words)")


def abort(request):
    import os

    os.abort()  # as a vendor library's failed assertion does


def crash(request):
    return {"ratio": 1 / request["zero"]}


def _importable(name):
    import importlib.util

    return importlib.util.find_spec(name) is not None


ACTIONS = {"where": where, "refuse": refuse, "crash": crash, "abort": abort}
