#!/usr/bin/env python3
"""Replays a MONITOR capture of a drain against a redis-server, one command at a time,
for tools/redis_instructions.sh.

Usage: redis_replay.py CAPTURE.mon CAPTURED_SCRIPTS NEW_SCRIPTS PORT

CAPTURED_SCRIPTS is the src/redis/scripts folder of the build that made the capture,
NEW_SCRIPTS that of the scripts to measure (already loaded by SCRIPT LOAD): each
EVALSHA of a captured script becomes one of the new script of the same file name. A
claim's lease tags end in fencing tokens taken from Redis's clock, so they differ from
the capture's: they are read from the replayed claim's reply and put in place of the
captured tags in every later command. The scripts' arguments must keep their layout.
Commands of other clients (redis-cli's lower-case ones), subscriptions and
connection set-up are left out."""
import hashlib
import os
import re
import socket
import sys


def shas(d):
    common = open(os.path.join(d, "common.lua"), "rb").read()
    return {
        f: hashlib.sha1(common + open(os.path.join(d, f), "rb").read()).hexdigest()
        for f in os.listdir(d)
        if f.endswith(".lua") and f != "common.lua"
    }


ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "a": b"\a", "b": b"\b", '"': b'"', "\\": b"\\"}


def tokens(s):
    """The quoted arguments of a MONITOR line, unescaped."""
    out, i = [], 0
    while i < len(s):
        if s[i] != '"':
            i += 1
            continue
        i += 1
        buf = bytearray()
        while s[i] != '"':
            if s[i] == "\\":
                c = s[i + 1]
                if c == "x":
                    buf.append(int(s[i + 2 : i + 4], 16))
                    i += 4
                else:
                    buf += ESCAPES.get(c, c.encode())
                    i += 2
            else:
                buf += s[i].encode("latin-1")
                i += 1
        out.append(bytes(buf))
        i += 1
    return out


SKIP = {b"SUBSCRIBE", b"PSUBSCRIBE", b"UNSUBSCRIBE", b"MONITOR", b"CLIENT", b"HELLO", b"SCRIPT", b"INFO"}


def captured(mon):
    """The capture's commands of the worker, in order, as (arguments, the SET commands
    its scripts ran); the SETs of a claim.lua call hold its lease tags."""
    commands = []
    for line in open(mon, encoding="latin-1").read().split("\n"):
        m = re.match(r"[\d.]+ \[\d+ ([^\]]+)\] (.*)", line)
        if not m:
            continue
        args = tokens(m.group(2))
        if m.group(1) == "lua":
            if args and args[0] == b"SET" and commands:
                commands[-1][1].append(args[2])
            continue
        if not args or args[0] in SKIP or args[0].islower():
            continue
        commands.append((args, []))
    return commands


def read(reader):
    line = reader.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b"-"):
        return rest
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        return None if size < 0 else reader.read(size + 2)[:-2]
    if kind == b"*":
        size = int(rest)
        return None if size < 0 else [read(reader) for _ in range(size)]
    raise ValueError(line)


def send(sock, reader, args):
    sock.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
    return read(reader)


def main():
    mon, old, new, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    o, n = shas(old), shas(new)
    mapping = {o[f]: n[f] for f in o if f in n}
    claim = o.get("claim.lua")
    sock = socket.create_connection(("127.0.0.1", port))
    reader = sock.makefile("rb")
    tags, errors, commands = {}, 0, captured(mon)
    for args, sets in commands:
        is_claim = args[0] == b"EVALSHA" and args[1].decode() == claim
        if args[0] == b"EVALSHA":
            args[1] = mapping.get(args[1].decode(), args[1].decode()).encode()
        reply = send(sock, reader, [tags.get(a, a) for a in args])
        if isinstance(reply, bytes) and reply.startswith((b"ERR", b"NOSCRIPT", b"WRONGTYPE")):
            errors += 1
        if is_claim and sets and isinstance(reply, list) and isinstance(reply[1], int):
            # A tag is 14 hex digits of the worker, then the token in 16 decimal digits.
            for k, tag in enumerate(sets):
                tags[tag] = tag[:14] + b"%016d" % (reply[1] + k)
    print(f"replayed {len(commands)} commands, {errors} errors, {len(tags)} lease tags mapped")


if __name__ == "__main__":
    main()
