"""The shared remote cache against a real S3 server: moto's server mode on 127.0.0.1, reached through s3fs.

Each test builds the two example models through ``accelbuild run`` (a subprocess, as a user or CI would)
with ``--remote-cache s3://accelbuild-test/<prefix>``; the endpoint and dummy credentials come from the
environment, where s3fs/botocore look for them (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...).
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbuild.engine.cache import objects_in

from conftest import CliResult, big_checkout, clean_env, run_cli, run_cli_process, tree_bytes, two_model_checkout

s3fs = pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

BUCKET = "accelbuild-test"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_MAX_ATTEMPTS": "1"}
UNREACHABLE = "is unreachable"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on loopback with one bucket; yields its endpoint URL."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    fs = s3fs.S3FileSystem(key="testing", secret="testing", endpoint_url=endpoint, skip_instance_cache=True)
    fs.mkdir(BUCKET)
    yield endpoint
    server.stop()


def env_for(endpoint: str) -> dict[str, str]:
    return {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}


def s3(endpoint: str) -> s3fs.S3FileSystem:
    return s3fs.S3FileSystem(key="testing", secret="testing", endpoint_url=endpoint, skip_instance_cache=True)


def build(folder: Path, endpoint: str, prefix: str, *extra: str) -> CliResult:
    result = run_cli("run", "p.yaml", "--json", "--remote-cache", f"s3://{BUCKET}/{prefix}", *extra,
                     cwd=folder, env=env_for(endpoint))
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """A clean local build without any remote cache."""
    folder = two_model_checkout(tmp_path_factory.mktemp("reference"))
    assert run_cli("run", "p.yaml", cwd=folder).code == 0
    return tree_bytes(folder / "build/p")


def remote_entries(fs: s3fs.S3FileSystem, prefix: str) -> dict[str, dict]:
    return {path.rsplit("/", 1)[-1][:-5]: json.loads(fs.cat_file(path))
            for path in fs.find(f"{BUCKET}/{prefix}/entries")}


def assert_remote_whole(fs: s3fs.S3FileSystem, prefix: str) -> None:
    """Every remote entry names objects whose bytes hash to their names."""
    entries = remote_entries(fs, prefix)
    assert entries
    for key, entry in entries.items():
        assert entry["key"] == key
        for sha, size in objects_in(entry).items():
            data = fs.cat_file(f"{BUCKET}/{prefix}/objects/{sha[:2]}/{sha}")
            assert hashlib.sha256(data).hexdigest() == sha and len(data) == size


def test_fresh_checkout_restores_every_task_from_the_remote_cache(s3_endpoint: str, tmp_path: Path,
                                                                 reference: dict[str, bytes]) -> None:
    first = build(two_model_checkout(tmp_path / "ci-1"), s3_endpoint, "fresh")
    assert first.code == 0 and set(first.statuses().values()) == {"ran"}
    assert_remote_whole(s3(s3_endpoint), "fresh")
    fresh = two_model_checkout(tmp_path / "ci-2")  # its own state dir and local cache: empty
    second = build(fresh, s3_endpoint, "fresh")
    assert second.code == 0 and set(second.statuses().values()) == {"cached"}, second.stdout
    assert tree_bytes(fresh / "build/p") == reference


def test_artifacts_stored_as_parts_restore_byte_identically_from_the_remote(s3_endpoint: str,
                                                                          tmp_path: Path) -> None:
    first = big_checkout(tmp_path / "ci-1")
    assert build(first, s3_endpoint, "parts").code == 0
    fs = s3(s3_endpoint)
    assert_remote_whole(fs, "parts")
    assert any("parts" in meta for entry in remote_entries(fs, "parts").values() for meta in entry["files"].values())
    fresh = big_checkout(tmp_path / "ci-2")
    second = build(fresh, s3_endpoint, "parts")
    assert second.code == 0 and set(second.statuses().values()) == {"cached"}, second.stdout
    assert tree_bytes(fresh / "build") == tree_bytes(first / "build")


def test_corrupted_remote_object_is_detected_dropped_and_rebuilt(s3_endpoint: str, tmp_path: Path,
                                                                 reference: dict[str, bytes]) -> None:
    assert build(two_model_checkout(tmp_path / "a"), s3_endpoint, "corrupt").code == 0
    fs = s3(s3_endpoint)
    [mapping] = [e["files"]["mapping.json"] for e in remote_entries(fs, "corrupt").values()
                 if "mapping.json" in e["files"]]
    obj = f"{BUCKET}/corrupt/objects/{mapping['sha256'][:2]}/{mapping['sha256']}"
    data = bytearray(fs.cat_file(obj))
    data[len(data) // 2] ^= 0x01  # same size, one bit flipped
    fs.pipe_file(obj, bytes(data))

    fresh = two_model_checkout(tmp_path / "b")
    result = build(fresh, s3_endpoint, "corrupt")
    assert result.code == 0, result.stderr
    statuses = result.statuses()
    assert statuses.pop("p:map") == "ran"
    assert set(statuses.values()) == {"cached"}  # the rebuilt mapping.json is the same, so is everything after
    assert "does not match its SHA-256" in result.stderr and "rebuilding" in result.stderr
    assert tree_bytes(fresh / "build/p") == reference
    assert hashlib.sha256(fs.cat_file(obj)).hexdigest() == mapping["sha256"]  # written back whole
    assert_remote_whole(fs, "corrupt")


def test_two_builds_writing_the_same_entries_at_once_leave_a_consistent_cache(
        s3_endpoint: str, tmp_path: Path, reference: dict[str, bytes]) -> None:
    folders = [two_model_checkout(tmp_path / name) for name in ("x", "y")]
    env = clean_env() | env_for(s3_endpoint)
    procs = [subprocess.Popen([sys.executable, "-m", "accelbuild.cli", "run", "p.yaml", "--json", "-j", "2",
                               "--remote-cache", f"s3://{BUCKET}/shared"],
                              cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for folder in folders]
    for proc, folder in zip(procs, folders):
        stdout, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 0, stderr
        assert "Traceback" not in stderr and "warning" not in stderr, stderr
        assert tree_bytes(folder / "build/p") == reference
    fs = s3(s3_endpoint)
    assert_remote_whole(fs, "shared")
    assert len(remote_entries(fs, "shared")) == 9
    assert not [p for p in fs.find(f"{BUCKET}/shared") if ".tmp" in p]
    third = build(two_model_checkout(tmp_path / "z"), s3_endpoint, "shared")
    assert set(third.statuses().values()) == {"cached"}


class SeveringProxy:
    """A TCP proxy in front of the S3 server that goes away for good (listener and every open connection
    closed) right after it forwards the first write of a cache entry: the server is gone mid-build."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.severed = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.severed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self.lock:
                self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
                if from_client and chunk.startswith(b"PUT ") and b"/entries/" in chunk.split(b"\r\n", 1)[0]:
                    self.sever()
        except OSError:
            pass

    def sever(self) -> None:
        self.severed.set()
        with self.lock:
            for sock in [self.listener, *self.sockets]:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()


def test_s3_server_gone_mid_build_gives_one_warning_and_a_local_build(
        s3_endpoint: str, tmp_path: Path, reference: dict[str, bytes]) -> None:
    proxy = SeveringProxy(int(s3_endpoint.rsplit(":", 1)[1]))
    folder = two_model_checkout(tmp_path / "p")
    result = run_cli_process("run", "p.yaml", "--json", "-j", "2", "--remote-cache", f"s3://{BUCKET}/gone",
                             cwd=folder, env=env_for(f"http://127.0.0.1:{proxy.port}"))
    assert proxy.severed.is_set()
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert set(result.statuses().values()) == {"ran"}
    assert result.stderr.count(UNREACHABLE) == 1, result.stderr
    assert f"remote cache s3://{BUCKET}/gone {UNREACHABLE}" in result.stderr
    assert tree_bytes(folder / "build/p") == reference
    assert not (folder / ".accelbuild/remote-cache-down").exists()


def test_unreachable_remote_at_start_warns_once_and_builds(tmp_path: Path, reference: dict[str, bytes]) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there
    folder = two_model_checkout(tmp_path / "p")
    result = run_cli_process("run", "p.yaml", "--json", "-j", "2", cwd=folder,
                             env={**env_for(f"http://127.0.0.1:{port}"), "ACCELBUILD_REMOTE_CACHE": f"s3://{BUCKET}/x"})
    assert result.code == 0, result.stderr
    assert result.stderr.count(UNREACHABLE) == 1, result.stderr
    assert tree_bytes(folder / "build/p") == reference


def test_cache_push_and_pull_seed_a_fresh_checkout(s3_endpoint: str, tmp_path: Path,
                                                    reference: dict[str, bytes]) -> None:
    built = two_model_checkout(tmp_path / "built")
    assert run_cli("run", "p.yaml", cwd=built).code == 0  # no remote: only the local cache has it
    url = f"s3://{BUCKET}/seeded"
    push = run_cli("cache", "push", "--remote-cache", url, cwd=built, env=env_for(s3_endpoint))
    assert push.code == 0 and "pushed 9 entries" in push.stdout, push.stderr
    again = run_cli("cache", "push", "--remote-cache", url, cwd=built, env=env_for(s3_endpoint))
    assert "(0 bytes uploaded)" in again.stdout  # objects are written once

    fresh = two_model_checkout(tmp_path / "fresh")
    pull = run_cli("cache", "pull", cwd=fresh, env={**env_for(s3_endpoint), "ACCELBUILD_REMOTE_CACHE": url})
    assert pull.code == 0 and "pulled 9 entries" in pull.stdout, pull.stderr
    status = run_cli("status", "p.yaml", "--remote-cache", url, cwd=fresh, env=env_for(s3_endpoint))
    assert status.stdout.count("restorable from the remote cache") == 2  # the two imports: their inputs exist
    result = run_cli("run", "p.yaml", "--json", cwd=fresh)  # local cache only
    assert set(result.statuses().values()) == {"cached"}
    assert tree_bytes(fresh / "build/p") == reference


@pytest.mark.parametrize(("url", "message"), [
    ("nosuch://bucket/x", "unknown storage protocol 'nosuch'"),
    ("s3://", "names no bucket or folder"),
])
def test_bad_remote_cache_url_is_a_usage_error(tmp_path: Path, url: str, message: str) -> None:
    folder = two_model_checkout(tmp_path / "p")
    result = run_cli("run", "p.yaml", "--remote-cache", url, cwd=folder)
    assert result.code == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert not (folder / "build").exists()
    pushed = run_cli("cache", "push", cwd=folder)
    assert pushed.code == 2 and "no remote cache" in pushed.stderr
