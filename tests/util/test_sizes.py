"""util/sizes.py: sizes and days as written on a command line, and sizes as printed."""

from __future__ import annotations

import pytest

from accelbuild.util.sizes import parse_days, parse_size, size_text


def test_parse_size_units() -> None:
    assert [parse_size(t) for t in ("0", "10B", "2K", "2KiB", "3mb", "1G", "1T")] == \
        [0, 10, 2048, 2048, 3 << 20, 1 << 30, 1 << 40]
    for bad in ("", "M", "-1K", "1X", "1 PB"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_parse_days_and_size_text() -> None:
    assert parse_days("2") == 2.0
    with pytest.raises(ValueError):
        parse_days("soon")
    assert [size_text(n) for n in (1023, 1024, 5 << 20, 3 << 30)] == ["1023 bytes", "1.0 KiB", "5.0 MiB", "3.0 GiB"]
