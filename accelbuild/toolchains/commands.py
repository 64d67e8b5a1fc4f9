"""``accelbuild toolchain list`` and ``accelbuild toolchain install NAME``: the registered families' toolchains."""

from __future__ import annotations

import os
from pathlib import Path

from accelbuild import families
from accelbuild.errors import UserError
from accelbuild.toolchains.declaration import Toolchain
from accelbuild.toolchains.environment import find, install, root


def declared() -> dict[str, Toolchain]:
    """Every registered family's toolchain, by name (each family is imported to ask it)."""
    found = {}
    for name in families.registered():
        toolchain = families.get_target(name).toolchain
        if toolchain is not None:
            found[toolchain.name] = toolchain
    return found


def listing(where: Path | None = None) -> str:
    """One line per toolchain: installed (its folder and size) or not (the command that installs it)."""
    base = where or root()
    lines = [f"toolchains in {base}"]
    for name, toolchain in sorted(declared().items()):
        env = find(toolchain, base)
        state = (f"installed, Python {env.version[0]}.{env.version[1]}, {_size(env.folder)} in {env.folder.name}"
                 if env is not None and env.folder is not None else
                 f"not installed (accelbuild toolchain install {name}; {toolchain.size_note or 'size unknown'})")
        lines.append(f"  {name}: {state}")
        lines.append(f"    {len(toolchain.packages)} pinned packages, Python {toolchain.python_text()}"
                     + (f"; {toolchain.licence_note}" if toolchain.licence_note else ""))
    return "\n".join(lines) + "\n"


def install_named(name: str, force: bool, where: Path | None = None) -> str:
    known = declared()
    if name not in known:
        raise UserError(f"no registered family has a toolchain named {name!r} (toolchains: "
                        f"{', '.join(sorted(known)) or 'none'})")
    env = install(known[name], where, force=force)
    return f"toolchain {name}: ready, Python {env.version[0]}.{env.version[1]}, in {env.folder}\n"


def _size(folder: Path | None) -> str:
    if folder is None:
        return "?"
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(folder) for f in files
                if not os.path.islink(os.path.join(d, f)))
    return f"{total / 1e9:.2f} GB" if total >= 1e9 else f"{total / 1e6:.0f} MB"
