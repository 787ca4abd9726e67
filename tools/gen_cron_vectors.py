#!/usr/bin/env python3
"""Generate tests/data/cron_vectors.json: expected run times of `CRON:` lines,
computed independently of the Rust code with croniter and Python's zoneinfo.

Usage (from the repository root):

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install croniter
    /tmp/venv/bin/python tools/gen_cron_vectors.py > tests/data/cron_vectors.json

Method, per case (the same as tools/gen_rrule_vectors.py for rules):

* The line runs in naive wall-clock time of its zone: CRON_TZ= / TZ= when
  given (stripped here, croniter does not read it), else the case's "tz".
* croniter iterates naive local times from a day before `after`; six fields
  have seconds first (second_at_beginning=True).
* Each naive local time becomes an instant with zoneinfo and fold=0: a
  nonexistent time moves forward by the gap, an ambiguous one takes its first
  occurrence. Equal instants are one run.
* "expect" holds the first `n` instants strictly after `after`.
* A range A-A (or A-A/S) is written A for croniter, which reads it as "*"
  (croniter 7.0.0); where that changes its answer the case is marked too.
* Day of month and day of week follow Vixie cron: when either field starts
  with "*" a day must match both (croniter day_or=False), else either one.
  croniter ORs them whenever neither is a bare "*", so for a field such as
  "*/2" its own answer differs; such cases keep it in "croniter" with a note
  in "differs".

Cases marked "error": true are lines that redbike refuses (the Rust test
asserts an error); "why" says why.
"""

import datetime as dt
import json
import random
import re
import sys
from zoneinfo import ZoneInfo

from croniter import croniter

UTC = dt.timezone.utc
NAMES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
         "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
         "@hourly": "0 * * * *"}


def ts(s, zone="UTC"):
    naive = dt.datetime.strptime(s, "%Y-%m-%d %H:%M:%S")
    return int(naive.replace(tzinfo=ZoneInfo(zone)).timestamp())


def split_line(line):
    """(zone name or None, fields) of the text after CRON:."""
    body = line[len("CRON:"):].strip()
    zone = None
    for prefix in ("CRON_TZ=", "TZ="):
        if body.upper().startswith(prefix):
            zone, body = body[len(prefix):].split(None, 1)
    return zone, NAMES.get(body.lower(), body)


def same_ends(fields):
    """A-A and A-A/S written as A: croniter 7 reads such a range as "*"."""
    return re.sub(r"\b(\d+)-\1(/\d+)?\b", r"\1", fields)


def expand(line, tzname, after, n, vixie=True):
    zname, fields = split_line(line)
    if vixie:
        fields = same_ends(fields)
    zone = ZoneInfo(zname or tzname)
    parts = fields.split()
    dom, dow = parts[-3], parts[-1]
    day_or = not (dom.startswith("*") or dow.startswith("*")) if vixie else True
    local_after = dt.datetime.fromtimestamp(after, zone).replace(tzinfo=None)
    it = croniter(fields, local_after - dt.timedelta(days=1), day_or=day_or,
                  second_at_beginning=len(parts) == 6)
    found = set()
    horizon = None
    for _ in range(100_000):
        local = it.get_next(dt.datetime)
        if local.year > 9999 or (horizon is not None and local > horizon):
            break
        inst = int(local.replace(tzinfo=zone, fold=0).timestamp())
        if inst > after:
            found.add(inst)
            if len(found) >= n and horizon is None:
                horizon = local + dt.timedelta(days=1)
    return sorted(found)[:n]


CASES = []


def case(line, tz="UTC", after="2024-06-15 12:34:56", n=5):
    CASES.append((line, tz, after, n, None))


def error(line, why):
    CASES.append((line, "UTC", "2024-06-15 12:34:56", 0, why))


# --- syntax: lists, ranges, steps, names, @names, seconds -----------------------
for line in ["CRON:*/5 * * * *", "CRON:0 9 * * *", "CRON:30 2 * * *", "CRON:0 0 1 * *",
             "CRON:15,45 8-18/2 * * MON-FRI", "CRON:0 12 * JAN,jul *", "CRON:0 0 29 2 *",
             "CRON:0 0 31 * *", "CRON:59 23 28-31 * *", "CRON:5/15 * * * *",
             "CRON:0 9 1 * MON", "CRON:0 9 1,15 * 5", "CRON:0 9 * * 7", "CRON:0 9 * * 0,7",
             "CRON:0 9 */2 * MON", "CRON:0 9 1-7 * */3",
             "CRON:@yearly", "CRON:@annually", "CRON:@monthly", "CRON:@weekly", "CRON:@daily",
             "CRON:@midnight", "CRON:@hourly", "CRON:*/10 * * * * *", "CRON:30 0 9 * * sun",
             "CRON:0-10/5 30 6 * * *", "CRON:0 0 0 29 2 *", "cron:0 9 * * sat,sun", "CRON:0 9 * 8-8 *"]:
    case(line)
case("CRON:0 0 29 2 MON", after="2023-01-01 00:00:00")
case("CRON:0 0 29 2 *", after="2097-01-01 00:00:00", n=2)

# --- time zones and DST: 02:30 on spring-forward and fall-back days -------------
for zone, spring, fall in [("Europe/Berlin", "2024-03-30 00:00:00", "2024-10-26 00:00:00"),
                           ("America/New_York", "2024-03-09 12:00:00", "2024-11-02 12:00:00")]:
    for line in ["CRON:30 2 * * *", "CRON:*/20 1-3 * * *", "CRON:0,30 2,3 * * *", f"CRON:CRON_TZ={zone} 30 2 * * *",
                 f"CRON:TZ={zone} */15 * * * *", "CRON:0 * * * *"]:
        case(line, zone, spring, 6)
        case(line, zone, fall, 6)
case("CRON:30 2 * * *", "Australia/Lord_Howe", "2024-10-05 00:00:00", 4)
case("CRON:0 0 * * *", "America/Santiago", "2024-09-07 00:00:00", 4)
case("CRON:CRON_TZ=Asia/Kolkata 0 9 * * MON-FRI", "UTC", "2024-06-15 12:34:56", 5)

# --- lines redbike refuses ---------------------------------------------------------
error("CRON:* * * *", "four fields")
error("CRON:* * * * * * *", "seven fields")
error("CRON:60 * * * *", "minute out of range")
error("CRON:* 24 * * *", "hour out of range")
error("CRON:* * 0 * *", "day of month 0")
error("CRON:* * * 13 *", "month 13")
error("CRON:* * * * 8", "weekday 8")
error("CRON:5-1 * * * *", "backwards range")
error("CRON:*/0 * * * *", "step 0")
error("CRON:0 0 30 2 *", "30 February never fires")
error("CRON:0 0 31 4,6,9,11 *", "31st of 30-day months never fires")
error("CRON:@reboot", "@reboot is no time")
error("CRON:TZ=Mars/Olympus 0 9 * * *", "unknown zone")
error("CRON:0 9 * * MONDAY", "bad name")
error("CRON:", "empty")
error("CRON:0 9 * * SAT-SUN", "backwards range (croniter wraps it around)")


def random_cases(count, seed=1999):
    rnd = random.Random(seed)
    made = []

    def field(lo, hi, names=None):
        r = rnd.random()
        if r < 0.3:
            return "*"
        if r < 0.45:
            return f"*/{rnd.randint(2, hi - lo)}"
        items = []
        for _ in range(rnd.randint(1, 3)):
            a = rnd.randint(lo, hi)
            k = rnd.random()
            if k < 0.4:
                items.append(str(a))
            else:
                b = rnd.randint(a, hi)
                items.append(f"{a}-{b}" + (f"/{rnd.randint(1, 5)}" if k < 0.7 else ""))
        return ",".join(items)
    zones = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Kolkata"]
    afters = ["2024-03-30 23:30:00", "2024-10-26 23:40:00", "2024-03-10 06:30:00",
              "2024-11-03 05:20:00", "2024-04-06 15:30:00", "2024-06-15 12:34:56",
              "2025-01-01 00:00:00", "2024-02-28 23:00:00"]
    while len(made) < count:
        fields = [field(0, 59), field(0, 23), field(1, 31), field(1, 12), field(0, 6)]
        if rnd.random() < 0.2:
            fields.insert(0, field(0, 59))
        line = "CRON:" + " ".join(fields)
        tz = rnd.choice(zones)
        a = rnd.choice(afters)
        if any(c[0] == line for c in CASES + made):
            continue
        made.append((line, tz, a, 4, None))
    return made


def main():
    CASES.extend(random_cases(150))
    out = []
    for line, tz, after, n, why in CASES:
        a = ts(after)
        if why is not None:
            out.append({"line": line, "tz": tz, "after": a, "error": True, "why": why})
            continue
        try:
            expect = expand(line, tz, a, n)
        except (ValueError, KeyError) as e:
            # croniter finds no date (e.g. 31 in 30-day months only): redbike refuses.
            out.append({"line": line, "tz": tz, "after": a, "error": True,
                        "why": f"never fires (croniter: {type(e).__name__})"})
            continue
        made = {"line": line, "tz": tz, "after": a, "n": n, "expect": expect}
        theirs = expand(line, tz, a, n, vixie=False)
        if theirs != expect:
            why = []
            if same_ends(split_line(line)[1]) != split_line(line)[1]:
                why.append("croniter reads a range A-A as *")
            why.append("croniter ORs the day fields when one starts with * but is not *")
            made["croniter"] = theirs
            made["differs"] = "; ".join(why)
        out.append(made)
    print(f"{len(out)} cases", file=sys.stderr)
    sys.stdout.write("[\n" + ",\n".join(json.dumps(c) for c in out) + "\n]\n")


if __name__ == "__main__":
    main()
