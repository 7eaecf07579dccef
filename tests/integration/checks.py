"""What the Python check scripts share (poison.py, vhosts.py): one
"PASS name" or "FAIL name: why" line per check, for lib.sh's run_checks,
and the exit status they add up to."""
import sys

fails = 0


def check(name, cond, why=""):
    global fails
    if cond:
        print("PASS " + name)
    else:
        fails += 1
        print("FAIL %s: %s" % (name, why))


def done():
    sys.exit(1 if fails else 0)
