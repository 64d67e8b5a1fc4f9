"""``accelbuild cache info | gc | push | pull``: the artifact cache, and seeding a shared remote one."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from accelbuild.commands import common
from accelbuild.errors import InputFileError, UserError
from accelbuild.util.sizes import size_text

if TYPE_CHECKING:
    from accelbuild.engine.cache import ArtifactCache
    from accelbuild.engine.remote_cache import RemoteStore


def main(args: argparse.Namespace) -> int:
    return {"push": _push, "pull": _pull, "info": _info, "gc": _gc}[args.cache_command](args)


def _info(args: argparse.Namespace) -> int:
    from accelbuild.engine.cache import ArtifactCache

    options = common.options(args)
    usage = ArtifactCache(options.cache_dir).usage()
    print(f"{options.cache_dir}: {usage.entries} entries, {usage.objects} objects, {size_text(usage.bytes)} "
          f"stored ({size_text(usage.logical)} of files as restored)")
    return 0


def _gc(args: argparse.Namespace) -> int:
    from accelbuild.engine.cache import ArtifactCache

    cache = ArtifactCache(common.options(args).cache_dir)
    if args.max_size is None and args.older_than is None:
        raise InputFileError("cache gc", "give --max-size SIZE and/or --older-than DAYS")
    result = cache.gc(args.max_size, None if args.older_than is None else args.older_than * 86400)
    print(f"removed {result.entries_removed} entries and {result.objects_removed} objects; "
          f"{result.left.entries} entries, {size_text(result.left.bytes)} left")
    return 0


def _pair(args: argparse.Namespace) -> tuple[ArtifactCache, RemoteStore]:
    from accelbuild.engine.cache import ArtifactCache
    from accelbuild.engine.remote_cache import RemoteSpec, RemoteStore

    url = common.remote_cache_url(args)
    if url is None:
        raise UserError("accelbuild cache: no remote cache (give --remote-cache URL or set ACCELBUILD_REMOTE_CACHE)")
    return ArtifactCache(common.options(args).cache_dir), RemoteStore(RemoteSpec(url))


def _push(args: argparse.Namespace) -> int:
    local, remote = _pair(args)
    entries, uploaded = remote.push_all(local)
    print(f"pushed {entries} entr{'y' if entries == 1 else 'ies'} to {remote.url} ({uploaded} bytes uploaded)")
    return 0


def _pull(args: argparse.Namespace) -> int:
    local, remote = _pair(args)
    fetched, damaged = remote.pull_all(local)
    print(f"pulled {fetched} entr{'y' if fetched == 1 else 'ies'} from {remote.url} into {local.root}"
          + (f"; {damaged} damaged or incomplete, skipped" if damaged else ""))
    return 0
