#!/usr/bin/env python3
"""check_readme.py [--show] README.md ... — every excerpt and figure a README quotes comes
from a command, and still matches what the command prints (tests/cli readme_excerpts).

What is checked, in each file:
  ```console blocks      each line "$ CMD" is run; the lines after it, up to the next
                         "$ " line, are an excerpt of what CMD prints (stdout and stderr
                         together). A line "..." stands for any lines left out.
  <!-- output of: CMD --> the fenced block right after it is an excerpt of CMD's output.
  <!-- check: CMD         every TEXT is printed by CMD (spacing aside) and quoted in the text
       shows: TEXT          that follows the comment (up to the next heading or check):
       prints: TEXT -->     figures in prose stay the ones the command gives. A
                            "prints:" TEXT must be printed only (a command that checks
                            a file, say).
A fenced block with no info string is an error: say what it is (console, text, c, ...).

An excerpt is a window of the output: its lines (between "..." lines) must appear in
order, each run of them as consecutive lines. Before comparing, both sides are masked:
addresses (0x and 6+ hex digits), times (123 ns), process ids, and the absolute paths of
the checkout and the build, so that a README can quote a real run.

Commands run in a scratch folder in which bench/, examples/ and docs/ are the
checkout's and build/ is the build under test ($BUILD), with that build's vramguard
first on PATH. Exit 0 if everything matches, else 1 with each difference.
--show prints each command's masked output instead (to update a README by hand).
Environment: BUILD (required), ROOT (default: two folders up from here)."""
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.environ.get("ROOT") or os.path.normpath(os.path.join(os.path.dirname(
    os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("BUILD", "")


def mask(text, scratch):
    """The text with what differs from run to run masked."""
    for path, name in ((scratch, ""), (BUILD, "build"), (ROOT, "")):
        if path:
            text = text.replace(path + "/", name + "/" if name else "")
            text = text.replace(path, name or ".")
    text = re.sub(r"0x[0-9a-fA-F]{6,}", "0x…", text)
    text = re.sub(r"\b\d+(\.\d+)? ?(ns|us|µs|ms)\b", "… ns", text)
    text = re.sub(r"\b(process|pid) \d+", r"\1 …", text)
    return "\n".join(line.rstrip() for line in text.splitlines())


def run(cmd, scratch):
    env = dict(os.environ, PATH=os.path.join(scratch, "build") + os.pathsep + os.environ["PATH"],
               COLUMNS="100")
    try:
        r = subprocess.run(["bash", "-c", cmd + " 2>&1"], cwd=scratch, env=env, timeout=300,
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, "timed out after 300 s"
    out = r.stdout.decode(errors="replace")
    if r.returncode in (126, 127):
        return None, "could not run (exit %d): %s" % (r.returncode, out.strip()[-300:])
    return mask(out, scratch), None


def matches(excerpt, output):
    """Do the excerpt's runs of lines appear in the output, in order, each contiguous?"""
    runs, cur = [], []
    for line in excerpt:
        if line.strip() == "...":
            if cur:
                runs.append(cur)
            cur = []
        else:
            cur.append(line)
    if cur:
        runs.append(cur)
    at = 0
    for r in runs:
        found = False
        for i in range(at, len(output) - len(r) + 1):
            if output[i:i + len(r)] == r:
                at, found = i + len(r), True
                break
        if not found:
            return False, r
    return True, None


def items(path):
    """(line number, kind, command, payload) for each checked item of a README."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i, pending = [], 0, None
    while i < len(lines):
        line = lines[i]
        m = re.match(r"\s*<!--\s*output of:\s*(.*?)\s*-->\s*$", line)
        if m:
            pending = (i + 1, m.group(1))
            i += 1
            continue
        if re.match(r"\s*<!--\s*check:", line):
            start, block = i + 1, [line]
            while "-->" not in lines[i]:
                i += 1
                block.append(lines[i])
            text = " ".join(block)
            cmd = re.search(r"check:\s*(.*?)\s*(shows:|prints:|-->)", text).group(1)
            shows = [(k, s.strip()) for k, s in
                     re.findall(r"(shows|prints):\s*(.*?)\s*(?=shows:|prints:|-->)", text)]
            prose = []
            for later in lines[i + 1:]:
                if later.startswith("#") or "<!-- check:" in later:
                    break
                prose.append(later)
            out.append((start, "check", cmd, (shows, " ".join(" ".join(prose).split()))))
            i += 1
            continue
        m = re.match(r"\s*```(\S*)\s*$", line)
        if m:
            info, body, j = m.group(1), [], i + 1
            while j < len(lines) and not re.match(r"\s*```\s*$", lines[j]):
                body.append(lines[j])
                j += 1
            if pending and pending[0] >= i - 1:
                out.append((i + 1, "excerpt", pending[1], body))
            elif info == "console":
                cmd, excerpt, at = None, [], i + 1
                for k, b in enumerate(body + ["$ "]):
                    if b.startswith("$ "):
                        if cmd:
                            out.append((at, "excerpt", cmd, excerpt))
                        cmd, excerpt, at = b[2:].strip(), [], i + 2 + k
                    else:
                        excerpt.append(b)
            elif info == "":
                out.append((i + 1, "unlabelled", None, None))
            pending = None
            i = j + 1
            continue
        i += 1
    return out


def main(argv):
    show = "--show" in argv
    files = [a for a in argv if a != "--show"]
    if not BUILD or not files:
        sys.exit(__doc__)
    problems, checked = [], 0
    scratch = tempfile.mkdtemp(prefix="vg-readme-")
    try:
        for name in ("bench", "examples", "docs"):
            os.symlink(os.path.join(ROOT, name), os.path.join(scratch, name))
        os.symlink(BUILD, os.path.join(scratch, "build"))
        cache = {}
        for path in files:
            rel = os.path.relpath(path, ROOT)
            for line, kind, cmd, payload in items(path):
                where = "%s:%d" % (rel, line)
                if kind == "unlabelled":
                    problems.append("%s: a fenced block without an info string: say what it "
                                    "is (console, text, c, ...)" % where)
                    continue
                if cmd not in cache:
                    cache[cmd] = run(cmd, scratch)
                output, err = cache[cmd]
                checked += 1
                if show:
                    print("### %s: $ %s\n%s\n" % (where, cmd, output if output is not None else err))
                    continue
                if output is None:
                    problems.append("%s: $ %s: %s" % (where, cmd, err))
                    continue
                out_lines = output.split("\n")
                if kind == "excerpt":
                    excerpt = [mask(x, scratch) for x in payload]
                    while excerpt and not excerpt[-1].strip():
                        excerpt.pop()
                    if not excerpt:
                        continue
                    ok, missing = matches(excerpt, out_lines)
                    if not ok:
                        near = difflib.get_close_matches(missing[0], out_lines, n=1, cutoff=0.3)
                        problems.append(
                            "%s: $ %s\n  the excerpt's lines\n    %s\n  are not in its output%s"
                            % (where, cmd, "\n    ".join(missing[:6]),
                               "; the nearest line is\n    " + near[0] if near else ""))
                else:
                    shows, prose = payload
                    flat = " ".join(output.split())  # (a figure in prose: spacing aside)
                    for how, text in shows:
                        if " ".join(mask(text, scratch).split()) not in flat:
                            problems.append("%s: $ %s does not print '%s'" % (where, cmd, text))
                        if how == "shows" and text not in prose:
                            problems.append("%s: the text after the check does not quote '%s'"
                                            % (where, text))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if show:
        return 0
    for p in problems:
        print("README MISMATCH " + p + "\n", file=sys.stderr)
    print("%d excerpts and figures checked, %d mismatches" % (checked, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
