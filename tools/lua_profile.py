#!/usr/bin/env python3
"""Writes the claim.lua and finish.lua calls of a drain captured by
tools/redis_instructions.sh as a Lua file, for tools/lua_profile.lua.

Usage: lua_profile.py CAPTURE.mon CAPTURED_SCRIPTS OUT.lua

CAPTURED_SCRIPTS holds the scripts of the build that made the capture, as
tools/redis_instructions.sh says (their SHA-1s name the calls in the capture)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redis_replay import captured, shas  # noqa: E402


def lua_string(b):
    """A Lua string literal of the bytes `b`, every byte kept."""
    return '"' + "".join(
        "\\%d" % c if c < 32 or c > 126 or c in (34, 92) else chr(c) for c in b
    ) + '"'


def main():
    mon, scripts, out = sys.argv[1], sys.argv[2], sys.argv[3]
    names = {sha: f[: -len(".lua")] for f, sha in shas(scripts).items()}
    calls = {"claim": [], "finish": []}
    for args, _ in captured(mon):
        name = args[0] == b"EVALSHA" and names.get(args[1].decode())
        if name in calls:
            calls[name].append(args[2:])
    with open(out, "w") as f:
        f.write("CALLS = {}\n")
        for name, list_ in calls.items():
            f.write("CALLS.%s = {\n" % name)
            for a in list_:
                nkeys = int(a[0])
                keys = ",".join(lua_string(x) for x in a[1 : 1 + nkeys])
                argv = ",".join(lua_string(x) for x in a[1 + nkeys :])
                f.write("{keys={%s}, argv={%s}},\n" % (keys, argv))
            f.write("}\n")
    print(", ".join("%d %s calls" % (len(v), k) for k, v in calls.items()))


if __name__ == "__main__":
    main()
