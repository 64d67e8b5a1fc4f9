import json
import os
import shutil
from pathlib import Path

from accelbuild.engine.cache import ArtifactCache

from conftest import big_checkout, run_cli, tree_bytes


def _files(folder: Path, **contents: bytes) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, data in contents.items():
        (folder / name).write_bytes(data)
        paths[name] = folder / name
    return paths


def test_store_and_restore(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    produced = _files(tmp_path / "work", a=b"alpha", b=b"beta")
    cache.store("k" * 64, produced)
    targets = {"a": tmp_path / "out/a", "b": tmp_path / "out/b"}
    assert cache.restore("k" * 64, targets)
    assert targets["a"].read_bytes() == b"alpha" and targets["b"].read_bytes() == b"beta"
    assert not cache.restore("x" * 64, targets)


def test_restore_removes_optional_outputs_the_entry_lacks(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    cache.store("k" * 64, _files(tmp_path / "work", a=b"alpha"))
    stale = tmp_path / "out/pre.onnx"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    assert cache.restore("k" * 64, {"a": tmp_path / "out/a", "pre.onnx": stale})
    assert not stale.exists()


def test_altered_or_missing_object_is_a_miss_and_the_entry_is_dropped(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    cache.store("k" * 64, _files(tmp_path / "work", a=b"alpha"))
    (obj,) = [p for p in (tmp_path / "cache/objects").rglob("*") if p.is_file()]
    obj.write_bytes(b"alpHa")  # same size, different bytes
    assert cache.lookup("k" * 64) is None
    assert not list((tmp_path / "cache/entries").rglob("*.json"))
    cache.store("k" * 64, _files(tmp_path / "work", a=b"alpha"))  # a rebuild repairs the object
    assert cache.lookup("k" * 64) is not None


def test_truncated_entry_is_a_miss(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    cache.store("k" * 64, _files(tmp_path / "work", a=b"alpha"))
    (entry,) = (tmp_path / "cache/entries").rglob("*.json")
    entry.write_text(entry.read_text()[:10])
    assert cache.lookup("k" * 64) is None


def test_identical_contents_are_stored_once(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    cache.store("a" * 64, _files(tmp_path / "w1", x=b"same"))
    cache.store("b" * 64, _files(tmp_path / "w2", y=b"same"))
    assert len([p for p in (tmp_path / "cache/objects").rglob("*") if p.is_file()]) == 1


def _entry(cache: ArtifactCache, tmp: Path, key: str, payload: bytes) -> None:
    source = tmp / f"{key}.bin"
    source.write_bytes(payload)
    cache.store(key, {"out.bin": source})


def test_gc_evicts_the_least_recently_used_and_their_objects(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "c")
    for i, key in enumerate(["aa01", "bb02", "cc03"]):
        _entry(cache, tmp_path, key, bytes([i]) * 1000)
        entry = cache._entry_path(key)
        os.utime(entry, (1_000_000 + i, 1_000_000 + i))
    assert cache.lookup("aa01") is not None  # a read is a use: aa01 is now the most recent
    usage = cache.usage()
    assert (usage.entries, usage.objects) == (3, 3) and usage.bytes > 3000
    result = cache.gc(max_size=usage.bytes - 1)
    assert result.entries_removed == 1 and result.objects_removed == 1
    assert cache.lookup("bb02") is None and cache.lookup("aa01") is not None and cache.lookup("cc03") is not None
    old = cache.gc(older_than_seconds=10, now=1_000_002 + 5)  # cc03 last used at 1_000_002: kept
    assert old.entries_removed == 0
    assert cache.gc(older_than_seconds=0).left.entries == 0 and cache.usage().objects == 0


def test_gc_keeps_objects_shared_with_a_kept_entry(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "c")
    _entry(cache, tmp_path, "aa01", b"same bytes")
    _entry(cache, tmp_path, "bb02", b"same bytes")
    os.utime(cache._entry_path("aa01"), (1, 1))
    assert cache.usage().objects == 1  # content-addressed: one object for both entries
    cache.gc(max_size=cache.usage().bytes - 1)
    assert cache.lookup("bb02") is not None


def test_gc_and_info_on_an_empty_cache(project: Path) -> None:
    info = run_cli("cache", "info", "--cache-dir", "nothing", cwd=project)
    assert info.code == 0 and info.stdout.endswith("nothing: 0 entries, 0 objects, 0 bytes stored (0 bytes of files as restored)\n")
    gc = run_cli("cache", "gc", "--max-size", "1M", "--cache-dir", "nothing", cwd=project)
    assert gc.code == 0 and gc.stdout == "removed 0 entries and 0 objects; 0 entries, 0 bytes left\n"
    assert run_cli("cache", "gc", cwd=project).code == 2
    assert run_cli("cache", "gc", "--max-size", "lots", cwd=project).code == 2


def _entries(cache: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(cache.glob("entries/*/*.json"))]


def test_large_artifacts_are_stored_as_shared_parts_and_restored_byte_identically(tmp_path: Path) -> None:
    project = big_checkout(tmp_path / "a")
    assert run_cli("run", "p.yaml", cwd=project).code == 0
    built = tree_bytes(project / "build")
    records = {name: meta for entry in _entries(project / ".accelbuild/cache") for name, meta in entry["files"].items()}
    dfps = [meta for name, meta in records.items() if name.endswith(".dfp")]
    assert len(dfps) >= 4 and all("parts" in meta for meta in dfps)
    weights = {max(meta["parts"], key=lambda p: p["size"])["sha256"] for meta in dfps}
    assert len(weights) == 1  # every split's weights section is one object
    imported = records["imported.onnx"]["parts"]
    assert sum(p["size"] for p in imported if p.get("input") == "model") > 0.9 * records["imported.onnx"]["size"]
    info = run_cli("cache", "info", cwd=project)
    stored, logical = _sizes(info.stdout)
    assert stored < logical / 3, info.stdout
    # a fresh state restores every task from that cache: the same bytes
    shutil.rmtree(project / "build")
    again = run_cli("run", "p.yaml", "--json", "--state-dir", "third", "--cache-dir", ".accelbuild/cache", cwd=project)
    assert again.code == 0 and set(again.statuses().values()) == {"cached"}, again.stderr
    assert tree_bytes(project / "build") == built


def test_a_damaged_part_is_a_miss_and_the_task_is_rebuilt(tmp_path: Path) -> None:
    project = big_checkout(tmp_path / "a")
    assert run_cli("run", "p.yaml", cwd=project).code == 0
    built = tree_bytes(project / "build")
    cache = project / ".accelbuild/cache"
    part = next(p for entry in _entries(cache) for name, meta in entry["files"].items() if name == "best_split.dfp"
                for p in meta["parts"] if "data" not in p and "input" not in p)
    obj = cache / "objects" / part["sha256"][:2] / part["sha256"]
    data = bytearray(obj.read_bytes())
    data[100] ^= 0xFF
    obj.write_bytes(bytes(data))
    shutil.rmtree(project / "build")
    again = run_cli("run", "p.yaml", "--json", "--state-dir", "other", "--cache-dir", ".accelbuild/cache", cwd=project)
    assert again.code == 0 and again.statuses()["p:assemble"] == "ran", again.stderr
    assert tree_bytes(project / "build") == built


def _sizes(info: str) -> tuple[float, float]:
    """(stored, logical) MiB from ``cache info``."""
    import re

    found = re.search(r"([\d.]+) (KiB|MiB) stored \(([\d.]+) (KiB|MiB) of files", info)
    assert found, info
    scale = {"KiB": 1 / 1024, "MiB": 1.0}
    return float(found[1]) * scale[found[2]], float(found[3]) * scale[found[4]]
