"""DFP format v1: round trip, determinism, weight packing, and rejection of damaged or hostile files."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import numpy as np
import pytest

from accelbuild.errors import InputFileError
from accelbuild.quantize.precision import packed_size
from accelbuild.targets.mx3.dfp import Dfp, Header, Port, describe, dfp_bytes, parse_dfp, read_dfp, write_dfp
from accelbuild.targets.mx3.dfp.format import MAGIC, PREAMBLE, TABLE_ENTRY, canonical_json, plan_layout
from accelbuild.targets.mx3.dfp.model import ModelEntry
from accelbuild.targets.mx3.dfp.reader import CHECKSUM_MESSAGE
from accelbuild.targets.mx3.dfp.weights import WeightsSection, pack, read_tensor, unpack, unpack_scales

from conftest import sample_dfp, sample_header


def _seal(body: bytes) -> bytes:
    """A file whose trailing checksum matches, whatever its content (a buggy or hostile writer)."""
    return body + hashlib.sha256(body).digest()


def _craft(header: bytes, sections: list[tuple[str, bytes]], offsets: dict[int, int] | None = None,
           header_length: int | None = None) -> bytes:
    """A sealed file laid out like the writer does, with the raw header and table values given."""
    layout = plan_layout(len(header), [(name, len(payload)) for name, payload in sections])
    out = bytearray(PREAMBLE.pack(MAGIC, 1, 0, len(header) if header_length is None else header_length,
                                  len(sections)) + header)
    for index, (span, (name, payload)) in enumerate(zip(layout.sections, sections)):
        offset = (offsets or {}).get(index, span.offset)
        out += TABLE_ENTRY.pack(name.encode(), offset, span.length, hashlib.sha256(payload).digest())
    for span, (_, payload) in zip(layout.sections, sections):
        out += bytes(span.offset - len(out)) + payload
    out += bytes(layout.checksum_offset - len(out))
    return _seal(bytes(out))


def _rejected(data: bytes) -> str:
    with pytest.raises(InputFileError) as info:
        parse_dfp(data, "bad.dfp")
    assert str(info.value).startswith("bad.dfp: ")
    return info.value.message


# -- round trip and determinism ------------------------------------------------------------------------

def test_round_trip_equal(tmp_path: Path) -> None:
    for dfp in (sample_dfp(sim=True), sample_dfp(sim=False)):
        path = tmp_path / "prog.dfp"
        size = write_dfp(path, dfp)
        assert path.stat().st_size == size
        back = read_dfp(path)
        assert back == dfp
        assert dfp_bytes(back) == path.read_bytes()
    assert ("simcfg" in read_dfp(path).sections) is False


def test_equal_inputs_give_identical_bytes() -> None:
    one = sample_dfp()
    reordered_sections = dict(reversed(list(one.sections.items())))
    reordered_extra = dict(reversed(list(one.header.extra.items())))
    two = Dfp(Header(one.header.compiler, one.header.chip_gen, one.header.num_chips,
                     list(one.header.models), reordered_extra), reordered_sections)
    assert one == two
    assert dfp_bytes(one) == dfp_bytes(two) == dfp_bytes(sample_dfp())
    data = dfp_bytes(one)
    assert data[:8] == b"ACCELDFP" and data[8:10] == b"\x01\x00"
    assert data[-32:] == hashlib.sha256(data[:-32]).digest()


def test_invalid_content_is_refused_before_writing() -> None:
    with pytest.raises(ValueError, match="missing section 'weights'"):
        Dfp(sample_header(), {"cores": b"", "program": b""})
    with pytest.raises(ValueError, match="invalid section name"):
        Dfp(sample_header(), {"cores": b"", "program": b"", "weights": b"", "Bad Name": b""})
    with pytest.raises(ValueError, match="shape must be"):
        Port("x", (0, 3), "BF16", "l")
    with pytest.raises(ValueError, match="may not redefine"):
        sample_header(models=[])
    with pytest.raises(ValueError, match="not plain JSON"):
        sample_header(bad=float("nan"))


def test_describe_lists_header_models_ports_chips_and_sections() -> None:
    dfp = sample_dfp()
    size = len(dfp_bytes(dfp))
    text = describe(dfp, size)
    assert text == describe(dfp, size)
    for expected in ("DFP format 1", "accelbuild 0.1.0", "chip gen    mx3", "chip count  2", "det", "images",
                     "32x32x3", "RGB888", "layer head_cls", "chip 0: cores=12, layers=3, utilization=0.5",
                     "pipeline: demo", "simcfg", "weights", f"{size:,}"):
        assert expected in text, expected


def test_a_scalar_port_round_trips_and_is_described(tmp_path: Path) -> None:
    """A model's rank-0 input or output (a score, a gain) is a port of shape () holding one value."""
    base = sample_dfp()
    scalar = ModelEntry("vad", (Port("gain", (), "BF16", "mul"),), (Port("score", [], "FP32", "sum"),))
    dfp = Dfp(Header(base.header.compiler, base.header.chip_gen, base.header.num_chips,
                     (*base.header.models, scalar), base.header.extra), base.sections)
    write_dfp(tmp_path / "s.dfp", dfp)
    back = read_dfp(tmp_path / "s.dfp")
    assert back == dfp and back.header.models[-1].outputs[0].shape == ()
    lines = [line.split() for line in describe(back, 0).splitlines()]
    assert ["output", "score", "scalar", "FP32", "layer", "sum"] in lines
    assert ["input", "gain", "scalar", "BF16", "layer", "mul"] in lines


# -- weights -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [4, 8, 16])
@pytest.mark.parametrize("count", [0, 1, 7, 64])
def test_weights_round_trip(bits: int, count: int) -> None:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    values = np.random.default_rng(count).integers(low, high + 1, size=count)
    values[: min(count, 2)] = [low, high][: min(count, 2)]
    data = pack(values, bits)
    assert len(data) == packed_size(count, bits)
    assert np.array_equal(unpack(data, bits, count), values)


def test_weights_extremes_and_layout() -> None:
    assert pack(np.array([-8, 7, -1]), 4) == bytes([0x78, 0x0F])
    assert np.array_equal(unpack(pack(np.arange(-8, 8), 4), 4, 16), np.arange(-8, 8))
    assert np.array_equal(unpack(pack(np.arange(-128, 128), 8), 8, 256), np.arange(-128, 128))
    extremes = np.array([-32768, 32767, 0, -1])
    assert pack(extremes, 16) == b"\x00\x80\xff\x7f\x00\x00\xff\xff"
    assert np.array_equal(unpack(pack(extremes, 16), 16, 4), extremes)
    for bits, bad in ((4, 8), (4, -9), (8, 128), (16, -32769)):
        with pytest.raises(ValueError, match="does not fit"):
            pack(np.array([0, bad]), bits)
    with pytest.raises(ValueError, match="4, 8 or 16"):
        pack(np.array([1]), 2)
    with pytest.raises(ValueError, match="integers"):
        pack(np.array([1.0]), 8)
    with pytest.raises(ValueError, match="take 2 bytes"):
        unpack(b"\x00", 4, 3)


def test_weights_section_references() -> None:
    section = WeightsSection()
    a = section.add(np.array([[1, -2, 3]]), 4)
    scales = section.add_scales([0.5])
    b = section.add(np.full((2, 2), -300), 16)
    data = section.to_bytes()
    assert a == {"offset": 0, "length": 2, "bits": 4, "shape": [1, 3]}
    assert scales == 16 and b["offset"] == 32 and b["offset"] % 16 == 0
    assert np.array_equal(read_tensor(data, a), [[1, -2, 3]])
    assert np.array_equal(read_tensor(data, b), np.full((2, 2), -300))
    assert unpack_scales(data[16:20], 1).tolist() == [0.5]


# -- rejection -----------------------------------------------------------------------------------------

def test_rejects_bad_magic_and_version(tmp_path: Path) -> None:
    data = dfp_bytes(sample_dfp())
    assert _rejected(b"PK\x03\x04" + data[4:]) == "not a DFP file (bad magic)"
    assert _rejected(b"") == "not a DFP file (bad magic)"
    assert _rejected(data[:2] + b"X" + data[3:]) == "not a DFP file (bad magic)"
    assert _rejected(data[:8] + b"\x02\x00" + data[10:]) == \
        "DFP format version 2 is not supported (this accelbuild reads 1)"
    assert _rejected(data[:10] + b"\x01\x00" + data[12:]).startswith("unknown flags 0x0001")
    with pytest.raises(InputFileError, match="cannot read"):
        read_dfp(tmp_path / "missing.dfp")


def test_rejects_truncation_everywhere() -> None:
    data = dfp_bytes(sample_dfp())
    weights = plan_layout(int.from_bytes(data[12:16], "little"),
                          [(n, len(p)) for n, p in sorted(sample_dfp().sections.items())]).sections[-1]
    for cut in range(len(data)):
        message = _rejected(data[:cut])
        assert message.startswith("truncated") or message == "not a DFP file (bad magic)" and cut == 0, (cut, message)
    assert _rejected(data[:weights.end - 1]) == \
        f"truncated: section 'weights' ends at byte {weights.end} but the file has {weights.end - 1} bytes"
    assert _rejected(data[:-1]).startswith(f"truncated: the file has {len(data) - 1} bytes but its layout needs")
    assert _rejected(data + b"\0" * 5) == f"5 unexpected bytes after the end of the DFP (byte {len(data)})"


def test_rejects_any_flipped_byte() -> None:
    data = dfp_bytes(sample_dfp())
    header_end = PREAMBLE.size + int.from_bytes(data[12:16], "little")
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= 0x20
        message = _rejected(bytes(damaged))
        if position >= PREAMBLE.size and not header_end <= position < header_end + 4 * TABLE_ENTRY.size:
            assert message == CHECKSUM_MESSAGE, (position, message)


def test_rejects_bad_lengths_and_offsets() -> None:
    header = canonical_json(sample_header().to_dict())
    sections = [("cores", b"{}"), ("program", b"{}"), ("weights", b"\x01" * 40)]
    assert parse_dfp(_craft(header, sections), "ok.dfp").sections["weights"] == b"\x01" * 40
    huge = _craft(header, sections, header_length=0xFFFF_FFF0)
    assert _rejected(huge).startswith(f"truncated: header ends at byte {20 + 0xFFFF_FFF0} but the file has")
    past = _craft(header, sections, offsets={2: 10**12})
    assert _rejected(past) == f"section 'weights' starts at byte {10**12}, past the end of the file ({len(past)} bytes)"
    overlap = _craft(header, sections, offsets={1: 0})
    assert _rejected(overlap).startswith("section 'program' at byte 0 overlaps section 'cores'")
    assert _rejected(_craft(header, sections + [("weights", b"")])) == "duplicate section 'weights'"
    assert _rejected(_craft(header, [sections[1], sections[0], sections[2]])).startswith("sections out of order")
    assert _rejected(_craft(header, sections[:2])) == "missing section 'weights'"


def test_rejects_bad_headers_and_section_checksums() -> None:
    sections = [("cores", b"{}"), ("program", b"{}"), ("weights", b"")]
    good = canonical_json(sample_header().to_dict())
    assert _rejected(_craft(b"{not json", sections)) == "header is not valid JSON"
    assert _rejected(_craft(b"[" * 100_000, sections)) == "header is not valid JSON (nested too deeply)"
    assert _rejected(_craft(good.replace(b":", b": ", 1), sections)).startswith("header is not canonical JSON")
    assert _rejected(_craft(good.replace(b'"num_chips":2', b'"num_chips":0'), sections)) == \
        "header: num_chips must be a positive integer, got 0"
    assert _rejected(_craft(good.replace(b'"shape":[32,32,3]', b'"shape":"big"'), sections)).startswith(
        "header: models[0].inputs[0]: shape must be a list of positive integers (empty for a scalar)")
    data = bytearray(_craft(good, sections))
    cores = plan_layout(len(good), [(n, len(p)) for n, p in sections]).sections[0]
    data[cores.offset] ^= 1
    assert _rejected(bytes(data)) == CHECKSUM_MESSAGE
    assert _rejected(_seal(bytes(data[:-32]))) == "section 'cores' checksum mismatch"


def test_fuzzed_files_never_crash() -> None:
    base = dfp_bytes(sample_dfp())
    rng = random.Random(20240601)
    for _ in range(300):
        data = bytearray(base)
        kind = rng.randrange(5)
        if kind == 0:
            data = data[:rng.randrange(len(data))]
        elif kind == 1:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif kind == 2:
            at = rng.randrange(len(data))
            data[at:at + rng.randint(1, 32)] = rng.randbytes(rng.randint(0, 32))
        else:  # damage, then reseal: exercises every check behind the file checksum
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(PREAMBLE.size, len(data) - 32)] = rng.randrange(256)
            data = bytearray(_seal(bytes(data[:-32])))
        try:
            back = parse_dfp(bytes(data), "fuzz.dfp")
        except InputFileError:
            continue
        assert dfp_bytes(back) == bytes(data)  # whatever is accepted is canonical
