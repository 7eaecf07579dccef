# SPDX-License-Identifier: Apache-2.0
"""Exported definitions hold password hashes (issue 22, point 11): both
`roostd --export-definitions` and `roostctl export_definitions` leave
the file readable by its owner only (0600) under a umask of 022, new or
written over an existing 0644 file."""
import os
import stat
import subprocess

from hostile import ROOSTD, Broker, check, run

ROOSTCTL = os.path.join(os.path.dirname(ROOSTD), "..", "tools", "roostctl",
                        "roostctl")


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def exported(name, path, argv):
    for over in (False, True):
        what = "over a 0644 file" if over else "new"
        if over:
            with open(path, "w") as f:
                f.write("{}")
            os.chmod(path, 0o644)
        elif os.path.exists(path):
            os.unlink(path)
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        check("%s (%s): exit 0" % (name, what), r.returncode == 0,
              "exit %d: %s" % (r.returncode, r.stderr.strip()))
        ok = os.path.exists(path)
        check("%s (%s): the file is 0600" % (name, what),
              ok and mode(path) == 0o600,
              "mode %s" % (oct(mode(path)) if ok else "absent"))
        check("%s (%s): it holds the hashes" % (name, what),
              ok and "password_hash" in open(path).read(), "")


def main():
    os.umask(0o022)
    b = Broker(mgmt=True).start()
    out = os.path.join(b.tmp, "ctl.json")
    exported("roostctl export_definitions", out,
             [ROOSTCTL, "--host", "127.0.0.1", "--port", str(b.mgmt_port),
              "export_definitions", out])
    b.stop()
    out = os.path.join(b.tmp, "roostd.json")
    exported("roostd --export-definitions", out,
             [ROOSTD, "--export-definitions", out, "--data-dir", b.data,
              "--log-file", os.path.join(b.tmp, "export.log")])


run(main)
