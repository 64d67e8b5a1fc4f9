"""The toolchain side of the driver protocol (accelbuild/toolchains/protocol.py): standard library only.

Run by the toolchain's interpreter as ``python -I toolchain_runtime.py DRIVER REQUEST RESPONSE``. A driver
raises ``Refusal`` (``from toolchain_runtime import Refusal``) when the vendor tool refuses the input.
"""

import importlib.util
import json
import os
import sys
import traceback

PROTOCOL = 1


class Refusal(Exception):
    """The vendor tool refused the input; the message is the tool's own words."""


def _answer(path, response):
    response = dict(response, protocol=PROTOCOL)
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(response, handle, sort_keys=True)
    os.replace(tmp, path)


def main(argv):
    driver_path, request_path, response_path = argv[1:4]
    sys.modules["toolchain_runtime"] = sys.modules[__name__]  # the driver's import gets this very module
    try:
        with open(request_path) as handle:
            request = json.load(handle)
        if request.get("protocol") != PROTOCOL:
            raise ValueError(f"protocol {request.get('protocol')!r} asked, this runtime speaks {PROTOCOL}")
        spec = importlib.util.spec_from_file_location("accelbuild_driver", driver_path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        result = module.ACTIONS[request["action"]](request)
        _answer(response_path, {"ok": True, "result": result})
    except Refusal as refusal:
        _answer(response_path, {"ok": False, "refusal": str(refusal)})
    except Exception:  # noqa: BLE001 - every failure is answered, with its traceback
        _answer(response_path, {"ok": False, "error": traceback.format_exc()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
