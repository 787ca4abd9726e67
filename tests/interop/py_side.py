"""Drives the Python redbike 0.13.1 library against a test's Redis, for interop tests.

usage: python py_side.py PORT PREFIX TIMEFILE COMMAND [ARGS...]
  set JOBID SCHEDULE   Redbike.set
  unset JOBID          Redbike.unset
  dispatch_once        one dispatcher pass at now
  work QUEUES N        work until N jobs ran; by id: stop* raises StopWork, unset* UnsetJob,
                       back* returns a 30 s backoff, fail* raises, hang* sleeps 60 s;
                       prints each job id
environment: PY_TIMEOUT, the default timeout (lease seconds), 10 unless given
  tell JOBID           the JSON of Redbike.tell
  statuses             JOBID,EVENT,TIMESTAMP rows of Redbike.get_statuses
"""
import json
import os
import sys
import time

from redbike import Redbike, RoundRobin, StopWork, UnsetJob

port, prefix, timefile, command, args = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]


class Worker(RoundRobin):
    target = 0
    done = 0
    bike = None

    def work(self, jobid):
        print(jobid, flush=True)
        Worker.done += 1
        if Worker.done >= Worker.target:
            Worker.bike.control("HALT")
        if jobid.startswith("stop"):
            raise StopWork()
        if jobid.startswith("unset"):
            raise UnsetJob()
        if jobid.startswith("fail"):
            raise RuntimeError("failing on purpose")
        if jobid.startswith("back"):
            return 30
        if jobid.startswith("hang"):
            time.sleep(60)
        return None


queues = args[0] if command == "work" else "A"
bike = Redbike(Worker(queues), prefix=prefix, redis_config={"port": port}, timefile=timefile,
               default_timeout=int(os.environ.get("PY_TIMEOUT", "10")))
Worker.bike = bike

if command == "set":
    bike.set(args[0], args[1])
elif command == "unset":
    bike.unset(args[0])
elif command == "dispatch_once":
    bike.control("HALT")
    bike.dispatch(after=time.time())
    bike.clear_control()
elif command == "work":
    Worker.target = int(args[1])
    bike.clear_control()
    bike.work()
    bike.clear_control()
elif command == "tell":
    print(json.dumps(bike.tell(args[0]), sort_keys=True))
elif command == "statuses":
    for jobid, event, ts in sorted(bike.get_statuses()):
        print("%s,%s,%d" % (jobid, event, ts))
else:
    sys.exit("unknown command " + command)
