#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Every configuration key, roostd option and roostctl command the docs
name exists.

Run by docs_names.sh with Debian's python3. Reads docs/*.md and README.md
from SRCDIR and the man pages the programs print (roostd.8, roost.conf.5,
roostctl.8), and checks what they name against the programs themselves:

- configuration keys against `roostd --dump-config` (a list key, such as
  loopback_users, takes any KEY.NAME) and RabbitMQ's keys, which Roost
  accepts, ignores or refuses by name (broker/lib/rabbitconf_keys.inc and
  the rule patterns of broker/lib/rabbitconf.c, read from the sources:
  roostd does not print them);
- roostd options against `roostd --help`; roostctl options against
  `roostctl help` and `roostctl help COMMAND` for every command;
- roostctl commands against `roostctl help`.

How a name is recognised. In Markdown only code counts: a `backquoted`
span or a line of a fenced block. In it, a dotted name whose first part
is a configuration namespace (log, management, ssl_options, ... : the
first parts of all known keys) is a key, as is the name of `--set
NAME=VALUE` or `-s NAME=VALUE`; a name of the form KEY_SUFFIX where KEY
is an undotted key (close_timeout_ms) is a key that does not exist. A
part written *, N, NAME or in capitals stands for any name; a trailing
dot or * means "the keys under it". `--option` belongs to the command the
code starts with (roostd, roostctl, or something else, which is not
checked); a span that is only an option belongs to the last of roostd or
roostctl named before it on the line, else it must be an option of
roostd, roostctl or roost-perf. `roostctl COMMAND` is checked in code and
in prose. In the man pages, which are plain text once the roff is
stripped, every word is treated as code, and an option with no command
before it belongs to the page's program.

Prints "MISSING what `name` at FILE:LINE" for each name that does not
exist, then "docs_names: N names checked, M missing"; exits 1 if any is
missing.
Usage: docs_names.py ROOSTD ROOSTCTL ROOST_PERF SRCDIR
"""
import glob
import os
import re
import subprocess
import sys

# Names the docs mention on purpose that no Roost program knows, each
# with the reason. Kept small: a name belongs here only when the doc
# means another program's or RabbitMQ's name, never Roost's.
ALLOW = {
    # Celery's worker option (celery worker --concurrency 1).
    "--concurrency",
    # tests/integration/dl_cycles.py's option: run against RabbitMQ.
    "--reference",
    # Chromium's option, which the web UI's test drives it with.
    "--remote-debugging-pipe",
}
# Words the docs write for "a key" (--set key=value).
PLACEHOLDERS = {"key", "name"}

# Words that end a file name, not a key (log.c, defs.log, roost.conf).
FILE_EXT = re.compile(
    r"\.(c|h|inc|py|sh|js|rb|php|md|conf|log|snap|a|html|json|txt|in|"
    r"service|seg|pem|erl|config|expected|css|d)$")
WILD = re.compile(r"^(\*|[A-Z][A-Z0-9_]*)$")
PROGRAMS_CHECKED = ("roostd", "roostctl")


def run(*argv):
    return subprocess.run(argv, check=True, capture_output=True,
                          text=True).stdout


class Keys:
    """Known keys as patterns: lists of parts, "*" for any one part."""

    def __init__(self, roostd, srcdir):
        self.patterns = []
        typ = ""
        for line in run(roostd, "--dump-config").splitlines():
            # "# type: TYPE" comes just before the key's "# key = default".
            m = re.match(r"^# ([a-z][\w.]*) =", line)
            if line.startswith("# type: "):
                typ = line[len("# type: "):]
            elif m:
                self.patterns.append(m.group(1).split("."))
                if typ.startswith("list"):
                    self.patterns.append(m.group(1).split(".") + ["*"])
                typ = ""
        self.roost = len(self.patterns)
        with open(os.path.join(srcdir, "broker/lib/rabbitconf_keys.inc")) as f:
            for key in re.findall(r'^"([^"]+)",', f.read(), re.M):
                self.patterns.append(key.split("."))
        with open(os.path.join(srcdir, "broker/lib/rabbitconf.c")) as f:
            src = f.read()
        table = src[src.index("rules[] = {"):]
        table = table[:table.index("\n};")]
        for pat in re.findall(r'\{ "([^"]+)",', table):
            # A pattern ending in "." covers every key under it.
            parts = pat.rstrip(".").split(".")
            self.patterns.append(parts + (["*", "..."] if pat.endswith(".")
                                          else []))
        self.namespaces = {p[0] for p in self.patterns if len(p) > 1}
        self.undotted = {p[0] for p in self.patterns if len(p) == 1}
        if self.roost < 50 or len(self.patterns) < 500:
            sys.exit("docs_names: too few keys (%d of Roost's, %d in all)"
                     % (self.roost, len(self.patterns)))

    def exists(self, name):
        prefix = name.endswith(".")
        parts = name.rstrip(".").split(".")
        if parts[-1] == "*" and len(parts) > 1:
            prefix = True
        for pat in self.patterns:
            if self._match(parts, pat, prefix):
                return True
        return False

    @staticmethod
    def _match(parts, pat, prefix):
        for i, part in enumerate(parts):
            if i >= len(pat):
                return False
            if pat[i] == "...":
                return True
            if pat[i] == "*" or WILD.match(part) or part == pat[i]:
                continue
            return False
        return len(pat) == len(parts) or prefix or pat[len(parts)] == "..."


def roostctl_names(ctl):
    """roostctl's commands, its options (of all commands), and the options
    that take an argument."""
    top = run(ctl, "help")
    cmds = set(re.findall(r"^   ([a-z_]+) ", top, re.M))
    opts, takes_arg = set(), set()
    for text in [top] + [run(ctl, "help", c) for c in sorted(cmds)]:
        for m in re.finditer(r"(?<![\w-])(-[a-z?]|--[a-z][a-z0-9-]*)"
                             r"( <[^>]*>)?", text):
            opts.add(m.group(1))
            if m.group(2):
                takes_arg.add(m.group(1))
        # The short options of the table, with their long ones' argument.
        for m in re.finditer(r"^(-[a-z?]) +\| (--[a-z-]+)( <)?", text, re.M):
            opts.add(m.group(1))
            if m.group(3):
                takes_arg.add(m.group(1))
    if len(cmds) < 30 or len(opts) < 20:
        sys.exit("docs_names: roostctl help lists %d commands, %d options"
                 % (len(cmds), len(opts)))
    return cmds, opts, takes_arg


def options_of(helptext):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b",
                          helptext))


def strip_roff(text):
    text = re.sub(r"\\f[BIRP]|\\f\[[A-Z]*\]|\\&|\\c", "", text)
    text = text.replace("\\-", "-").replace("\\e", "\\")
    text = re.sub(r"\\\(..|\\\[[a-z]+\]", " ", text)
    return re.sub(r"^\.[A-Za-z]+ ?", "", text, flags=re.M)


class Checker:
    def __init__(self, roostd, ctl, perf, srcdir):
        self.keys = Keys(roostd, srcdir)
        self.roostd_opts = options_of(run(roostd, "--help"))
        self.ctl_cmds, self.ctl_opts, self.ctl_args = roostctl_names(ctl)
        self.perf_opts = options_of(run(perf, "--help"))
        self.configure_opts = options_of(
            run(os.path.join(srcdir, "configure"), "--help"))
        if len(self.roostd_opts) < 10 or len(self.perf_opts) < 20:
            sys.exit("docs_names: too few options in roostd --help (%d) "
                     "or roost-perf --help (%d)"
                     % (len(self.roostd_opts), len(self.perf_opts)))
        self.checked = 0
        self.missing = []

    def found(self, what, name, ok, where):
        self.checked += 1
        if not ok and name not in ALLOW:
            self.missing.append("MISSING %s `%s` at %s" % (what, name, where))

    # Keys -------------------------------------------------------------

    def key(self, name, where):
        if name in PLACEHOLDERS:
            return
        self.found("configuration key", name, self.keys.exists(name), where)

    def keys_in(self, code, where):
        for m in re.finditer(r"(?:^|\s)(?:-s|--set)[ =]([a-z][\w.*]*)=", code):
            self.key(m.group(1), where)
        for m in re.finditer(r"(?<![\w./:@$'\"=-])([a-z][a-z0-9_]*"
                             r"(?:\.(?:[A-Za-z0-9_]+|\*))*\.?)"
                             r"(?![\w/(@-])", code):
            name = m.group(1)
            start = m.start(1)
            rest = code[m.end(1):]
            if rest.startswith(".") and not name.endswith("."):
                continue  # a sentence's full stop is not part of it
            if "." in name.rstrip("."):
                if name.split(".")[0] not in self.keys.namespaces:
                    continue
                if FILE_EXT.search(name) or rest.startswith("("):
                    continue
                if start > 0 and code[start - 1] == "=" :
                    continue
                self.key(name, where)
            elif "_" in name and name not in self.keys.undotted:
                for k in self.keys.undotted:
                    if name.startswith(k + "_"):
                        self.found("configuration key (%s plus a suffix)" % k,
                                   name, False, where)
                        break

    # Options and commands ---------------------------------------------

    def command_words(self, code):
        """Each command in 'code': its program's name (basename) and the
        words after it."""
        for part in re.split(r"\||&&|;|\$\(|`|\(", code):
            words = part.split()
            while words and (re.match(r"^[A-Z_]+=", words[0]) or
                             words[0] in ("sudo", "env", "exec", "$", "#")):
                words.pop(0)
            if words:
                yield os.path.basename(words[0]), words[1:]

    def options_in(self, code, where, before, default=None):
        """'before': the text of the line before the code, for a span that
        is only an option."""
        for prog, words in self.command_words(code):
            if prog.startswith("-"):
                words = [prog] + words
                named = re.findall(r"\b(roostd|roostctl|configure)\b",
                                   before)
                prog = named[-1] if named else default
            opts = [o.group(1) for o in
                    (re.match(r"^(--[a-z][a-z0-9-]*)", w) for w in words) if o]
            if prog == "roostd":
                for o in opts:
                    self.found("roostd option", o, o in self.roostd_opts,
                               where)
            elif prog == "roostctl":
                self.roostctl(words, where)
            elif prog == "configure":
                for o in opts:
                    self.found("configure option", o,
                               o in self.configure_opts, where)
            elif prog is None:
                for o in opts:
                    self.found("option", o, o in self.roostd_opts |
                               self.ctl_opts | self.perf_opts |
                               self.configure_opts, where)

    def roostctl(self, words, where, only_command=False):
        i = 0
        while i < len(words) and words[i].startswith("-"):
            o = words[i].split("=")[0]
            if not only_command:
                self.found("roostctl option", o, o in self.ctl_opts, where)
            i += 2 if (o in self.ctl_args and "=" not in words[i]) else 1
        if i < len(words) and re.match(r"^[a-z][a-z_]*$", words[i]):
            cmd = words[i]
            self.found("roostctl command", cmd, cmd in self.ctl_cmds, where)
            if cmd == "help" and i + 1 < len(words) and \
                    re.match(r"^[a-z_]+$", words[i + 1]):
                self.found("roostctl command", words[i + 1],
                           words[i + 1] in self.ctl_cmds, where)
            if not only_command:
                for w in words[i + 1:]:
                    o = re.match(r"^(--[a-z][a-z0-9-]*)", w)
                    if o:
                        self.found("roostctl option", o.group(1),
                                   o.group(1) in self.ctl_opts, where)

    # Files ------------------------------------------------------------

    def markdown(self, path, label):
        with open(path) as f:
            lines = f.read().split("\n")
        prose = []
        fence = False
        for n, line in enumerate(lines, 1):
            if line.lstrip().startswith("```"):
                fence = not fence
                prose.append("")
                continue
            if fence:
                self.code(line, "%s:%d" % (label, n), "")
                prose.append("")
            else:
                prose.append(line)
        text = "\n".join(prose)
        for m in re.finditer(r"`([^`]+)`", text):
            line_no = text.count("\n", 0, m.start()) + 1
            line_start = text.rfind("\n", 0, m.start()) + 1
            self.code(m.group(1).replace("\n", " "),
                      "%s:%d" % (label, line_no),
                      text[line_start:m.start()])
        # roostctl COMMAND in prose (a command has an underscore, so that
        # "roostctl and ..." is not taken for one).
        for m in re.finditer(r"(?<![`\w/-])roostctl ([a-z]+_[a-z_]+)\b", text):
            line_no = text.count("\n", 0, m.start()) + 1
            self.found("roostctl command", m.group(1),
                       m.group(1) in self.ctl_cmds,
                       "%s:%d" % (label, line_no))

    def code(self, code, where, before, default=None):
        self.keys_in(code, where)
        self.options_in(code, where, before, default)

    def manpage(self, text, label, prog):
        for n, line in enumerate(strip_roff(text).split("\n"), 1):
            where = "%s:%d" % (label, n)
            self.keys_in(line, where)
            for m in re.finditer(r"(?<![\w-])(--[a-z][a-z0-9-]*)", line):
                named = re.findall(r"\b(roostd|roostctl|roost-perf)\b",
                                   line[:m.start()])
                p = named[-1] if named else prog
                opts = {"roostd": self.roostd_opts, "roostctl": self.ctl_opts,
                        "roost-perf": self.perf_opts}[p]
                self.found("%s option" % p, m.group(1), m.group(1) in opts,
                           where)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.split("Usage: ")[1])
    roostd, ctl, perf, srcdir = sys.argv[1:]
    c = Checker(roostd, ctl, perf, srcdir)
    files = sorted(glob.glob(os.path.join(srcdir, "docs", "*.md")))
    files.append(os.path.join(srcdir, "README.md"))
    for path in files:
        c.markdown(path, os.path.relpath(path, srcdir))
    c.manpage(run(roostd, "--man-page", "roostd.8"), "roostd.8", "roostd")
    c.manpage(run(roostd, "--man-page", "roost.conf.5"), "roost.conf.5",
              "roostd")
    c.manpage(run(ctl, "--man-page"), "roostctl.8", "roostctl")
    for line in c.missing:
        print(line)
    print("docs_names: %d names checked, %d missing"
          % (c.checked, len(c.missing)))
    sys.exit(1 if c.missing else 0)


if __name__ == "__main__":
    main()
