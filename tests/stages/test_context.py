"""accelbuild/stages/context.py: the canonical JSON form of stage parameters."""

from __future__ import annotations

from typing import Any

from accelbuild.stages.context import jsonable


def test_a_shared_memo_never_gives_a_freed_dicts_form_to_a_new_one() -> None:
    """Parameters build fresh dicts per task (a profile's band, say); once digested they may be freed, and
    CPython hands their memory, and so their id, to the next dict. The memo keeps each dict alive, so a new
    dict is never taken for an old one."""
    memo: dict[int, Any] = {}
    for i in range(500):
        assert jsonable({"value": i, "name": f"n{i}"}, memo) == {"name": f"n{i}", "value": i}


def test_a_dict_shared_by_many_parameters_is_walked_once() -> None:
    shared = {"b": [1, 2], "a": {"c": True}}
    memo: dict[int, Any] = {}
    first, second = jsonable(shared, memo), jsonable(shared, memo)
    assert first is second and first == {"a": {"c": True}, "b": [1, 2]}
