"""Hold one kazoo lock for the interop suite.

Driven by the line protocol of package interop: prints "waiting" once it
asks, "held <node>" once the lock is its own, releases after reading
"release" (or end of input) and prints "released".

Usage: /usr/bin/python3 holder.py <hosts> <path> <lock|write|read|election>
"""
import logging
import sys

from kazoo.client import KazooClient


def say(s):
    sys.stdout.write(s + "\n")
    sys.stdout.flush()


def await_release():
    for line in sys.stdin:
        if line.strip() == "release":
            return


def main():
    logging.basicConfig(level=logging.ERROR)
    hosts, path, recipe = sys.argv[1:4]
    zk = KazooClient(hosts=hosts, timeout=30)
    zk.start(timeout=30)
    try:
        if recipe == "election":
            election = zk.Election(path, "kazoo")

            def lead():
                say("held")
                await_release()

            say("waiting")
            election.run(lead)
        else:
            make = {"lock": zk.Lock, "write": zk.WriteLock, "read": zk.ReadLock}.get(recipe)
            if make is None:
                say("error unknown recipe " + recipe)
                sys.exit(2)
            lock = make(path, "kazoo")
            say("waiting")
            lock.acquire()
            say("held " + str(lock.node))
            await_release()
            lock.release()
        say("released")
    except Exception as e:  # reported on the protocol, not as a traceback
        say("error %r" % (e,))
        sys.exit(1)
    finally:
        zk.stop()
        zk.close()


if __name__ == "__main__":
    main()
