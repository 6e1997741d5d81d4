#!/usr/bin/env python3
"""The documentation check: every shell command the Markdown documents has a
disposition, and the ones that can run on this machine run.

A command is a logical line (continuation lines joined, comments dropped) of
a fenced block tagged `sh`, `bash` or `shell` in any Markdown file of the
source tree. Every fenced block must carry a language tag (`text` for output
and usage synopses), so a command cannot hide in an untagged block.

Each command has one entry in commands.yaml (next to this file), keyed by its
text, so an entry follows the command when it moves between files:

  run    run as written, from a copy of the checkout's root
  as     run the given form instead (loopback, --help, fewer iterations);
         `why` says why the written form cannot run here
  block  run with the rest of its block, as one script (a daemon started
         with `&`, used, then stopped); every command of the block says block
  test   what it does is run by the named ctest test (checked to exist)
  skip   cannot run here; `why` says why (hardware, a system service, ...)

run, as and block take `root: true` (network namespaces; as root a leading
`sudo` is dropped, as it is on a machine without sudo), `timeout` (seconds,
default 180) and `cleanup` (run afterwards, also when the command failed).

Scripts run under `set -e -o pipefail`, and a bare `wait` fails when a job
it waits for failed. Commands run with the installed programs' names on PATH (the build's
binaries under their installed names, as the packages install them) and a
`build` folder that is the build under test. Daemons a command or block
leaves running are killed with its process group.

Subcommands:
  check --source DIR [--test-names FILE]   inventory only (fast; label cpu)
  run --source DIR --build DIR --program NAME=PATH ...   check, then run
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import yaml

SHELL_LANGS = {"sh", "bash", "shell"}
KINDS = {"run", "as", "block", "test", "skip"}
SKIP_DIRS = {".git", "node_modules", "__pycache__"}
# Scripts stop at the first failing command, and a bare `wait` (after ranks
# started with `&`) fails when any of them failed, as bash's own does not.
PREAMBLE = """set -e -o pipefail
wait() {
  if (($#)); then builtin wait "$@"; return; fi
  local rc=0 p
  for p in $(jobs -p); do builtin wait "$p" || rc=$?; done
  return $rc
}
"""
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)")


class Block:
    def __init__(self, path, line, lang):
        self.path, self.line, self.lang = path, line, lang
        self.commands = []  # (line, text)

    def where(self):
        return f"{self.path}:{self.line}"


def markdown_files(source):
    for root, dirs, files in os.walk(source, followlinks=True):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIP_DIRS
            and not d.startswith("build")
            and not os.path.exists(os.path.join(root, d, "CMakeCache.txt"))
        )
        for f in sorted(files):
            if f.endswith(".md"):
                yield os.path.relpath(os.path.join(root, f), source)


def strip_comment(line):
    """The line up to an unquoted `#` that starts a word."""
    quote, i = None, 0
    while i < len(line):
        c = line[i]
        if c == "\\" and quote != "'":
            i += 2  # an escaped character, quoted or not
            continue
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
        i += 1
    return line


def commands_of(lines, first_line):
    out, pending, start = [], "", None
    for n, raw in enumerate(lines, first_line):
        text = strip_comment(raw).rstrip()
        if not pending and not text.strip():
            continue
        if start is None:
            start = n
        if text.endswith("\\"):
            pending += text[:-1].strip() + " "
            continue
        pending += text.strip()
        if pending.strip():
            out.append((start, " ".join(pending.split())))
        pending, start = "", None
    if pending.strip():
        out.append((start, " ".join(pending.split())))
    return out


def parse(source, rel):
    """(blocks, problems) of one Markdown file."""
    blocks, problems = [], []
    with open(os.path.join(source, rel), encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(2), m.group(3).lower()
        block = Block(rel, i + 1, lang)
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j])
            j += 1
        if j == len(lines):
            problems.append(f"{block.where()}: fence not closed")
        if not lang:
            problems.append(
                f"{block.where()}: fenced block without a language; tag commands `sh` "
                "and output or usage synopses `text`"
            )
        if lang in SHELL_LANGS:
            block.commands = commands_of(body, i + 2)
        blocks.append(block)
        i = j + 1
    return blocks, problems


def load_dispositions(path):
    with open(path, encoding="utf-8") as f:
        entries = yaml.safe_load(f) or []
    table, problems = {}, []
    for n, e in enumerate(entries):
        cmd = " ".join(str(e.get("command", "")).split())
        kind = e.get("kind")
        where = f"{os.path.basename(path)} entry {n + 1} ({cmd[:60]!r})"
        if not cmd:
            problems.append(f"{where}: no command")
            continue
        if kind not in KINDS:
            problems.append(f"{where}: kind {kind!r} is not one of {sorted(KINDS)}")
        if kind in ("as", "skip", "test") and not e.get("why"):
            problems.append(f"{where}: kind {kind} needs `why`")
        if kind == "as" and not e.get("with"):
            problems.append(f"{where}: kind as needs `with` (the form that runs)")
        if kind == "test" and not e.get("test"):
            problems.append(f"{where}: kind test needs `test` (a ctest name)")
        if cmd in table:
            problems.append(f"{where}: listed twice")
        table[cmd] = e
    return table, problems


def inventory(source, dispositions_path, test_names=None):
    """(blocks, table, problems): every command has exactly one entry."""
    blocks, problems = [], []
    for rel in markdown_files(source):
        b, p = parse(source, rel)
        blocks += b
        problems += p
    table, p = load_dispositions(dispositions_path)
    problems += p
    seen = set()
    for b in blocks:
        kinds = set()
        for line, cmd in b.commands:
            seen.add(cmd)
            e = table.get(cmd)
            if e is None:
                problems.append(
                    f"{b.path}:{line}: no disposition for `{cmd}`; add it to "
                    f"{os.path.relpath(dispositions_path, source)} (run, as, block, test or skip)"
                )
            else:
                kinds.add(e.get("kind"))
        if "block" in kinds and kinds != {"block"}:
            problems.append(f"{b.where()}: some commands say block, others {sorted(kinds - {'block'})}")
    for cmd in table:
        if cmd not in seen:
            problems.append(f"stale entry (no Markdown shows it any more): `{cmd}`")
    if test_names:
        with open(test_names, encoding="utf-8") as f:
            registered = set(f.read().split())
        for cmd, e in table.items():
            if e.get("kind") == "test" and e.get("test") not in registered:
                problems.append(f"`{cmd}`: names test {e.get('test')!r}, which is not registered")
    return blocks, table, problems


def shadow_root(source, build, workdir):
    """A folder whose entries link to the checkout's, with `build` the build under test."""
    root = os.path.join(workdir, "root")
    os.mkdir(root)
    for name in os.listdir(source):
        if name == "build":
            continue
        os.symlink(os.path.join(os.path.abspath(source), name), os.path.join(root, name))
    os.symlink(os.path.abspath(build), os.path.join(root, "build"))
    return root


def program_dir(programs, workdir):
    bindir = os.path.join(workdir, "bin")
    os.mkdir(bindir)
    for spec in programs:
        name, _, path = spec.partition("=")
        if os.path.exists(path):
            os.symlink(path, os.path.join(bindir, name))
    return bindir


def stop_group(pgid, grace_s=5.0):
    """SIGTERM to what a script left running (daemons started with `&`), and
    SIGKILL only after `grace_s`: a daemon stopped gracefully removes its
    ready file and saves its state (mixnet-ocsd with metrics takes 2 s)."""
    try:
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            time.sleep(0.1)
            os.killpg(pgid, 0)
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_script(script, cwd, env, timeout):
    """(rc, seconds, output); the whole process group is killed afterwards."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(
            ["bash", "-c", PREAMBLE + script],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        stop_group(p.pid)
        if rc is None:
            p.wait()
        out.seek(0)
        text = out.read().decode(errors="replace")
    return rc, time.monotonic() - start, text


def as_root_form(cmd):
    return re.sub(r"(^|;\s*|&&\s*|\|\s*)sudo\s+", r"\1", cmd)


def run_all(args, blocks, table):
    is_root = os.geteuid() == 0
    workdir = tempfile.mkdtemp(prefix="mixnet-doc-commands-")
    failures, not_run, ran = [], [], 0
    try:
        root = shadow_root(args.source, args.build, workdir)
        bindir = program_dir(args.program, workdir)
        env = dict(os.environ)
        py_dir = os.path.dirname(args.python) if args.python else ""
        env["PATH"] = os.pathsep.join(p for p in (bindir, py_dir, env.get("PATH", "")) if p)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        jobs, seen = [], set()
        for b in blocks:
            for line, cmd in b.commands:
                e = table[cmd]
                kind = e["kind"]
                where = f"{b.path}:{line}"
                if kind == "block":
                    if b.where() in seen:
                        continue
                    seen.add(b.where())
                    script = "\n".join(c for _, c in b.commands)
                    entries = [table[c] for _, c in b.commands]
                    jobs.append((b.where(), f"block of {len(b.commands)} commands", script,
                                 any(x.get("root") for x in entries),
                                 max(x.get("timeout", 180) for x in entries),
                                 [x["cleanup"] for x in entries if x.get("cleanup")]))
                elif kind in ("run", "as"):
                    script = cmd if kind == "run" else " ".join(str(e["with"]).split())
                    if ("script", script) in seen:
                        continue  # documented twice, or two lines with one form: runs once
                    seen.add(("script", script))
                    jobs.append((where, cmd, script, bool(e.get("root")), e.get("timeout", 180),
                                 [e["cleanup"]] if e.get("cleanup") else []))
                elif kind == "skip":
                    not_run.append(f"{where}: `{cmd}`: {e['why']}")
        for where, label, script, needs_root, timeout, cleanups in jobs:
            if args.only and not re.search(args.only, script):
                continue
            if needs_root and not is_root:
                not_run.append(f"{where}: `{label}`: needs root (network namespaces)")
                continue
            if is_root:
                script = "\n".join(as_root_form(s) for s in script.split("\n"))
            print(f"--- {where}: {label}", flush=True)
            if script != label:
                print(f"    runs: {script}", flush=True)
            rc, secs, out = run_script(script, root, env, timeout)
            for c in cleanups:
                crc, _, cout = run_script(as_root_form(c) if is_root else c, root, env, 60)
                if crc != 0 and rc == 0:
                    out, rc = f"cleanup `{c}` failed:\n{cout}", crc
            ran += 1
            status = "ok" if rc == 0 else ("timed out" if rc is None else f"exit {rc}")
            print(f"    {status} in {secs:.1f} s", flush=True)
            if rc != 0:
                tail = "\n".join(out.splitlines()[-40:])
                print("    " + tail.replace("\n", "\n    "), flush=True)
                failures.append(f"{where}: `{label}`: {status}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"doc commands: {ran} run, {len(failures)} failed, {len(not_run)} not run here")
    for n in not_run:
        print(f"MIXNET_PARTLY_SKIPPED: not run here: {n}")
    for f in failures:
        print(f"FAILED: {f}")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["check", "run"])
    ap.add_argument("--source", required=True, help="the checkout's root")
    ap.add_argument("--dispositions", help="default: commands.yaml next to this script")
    ap.add_argument("--test-names", help="the registered tests, one a line, to check `test` entries against")
    ap.add_argument("--build", help="run: the build folder under test")
    ap.add_argument("--program", action="append", default=[], help="run: NAME=PATH of an installed program")
    ap.add_argument("--python", help="run: the Python with torch (its folder leads PATH)")
    ap.add_argument("--only", help="run: only the commands matching this regex")
    args = ap.parse_args()
    dispositions = args.dispositions or os.path.join(os.path.dirname(os.path.abspath(__file__)), "commands.yaml")
    blocks, table, problems = inventory(args.source, dispositions, args.test_names)
    n = sum(len(b.commands) for b in blocks)
    print(f"doc commands: {n} commands in {len(blocks)} fenced blocks, {len(table)} dispositions")
    for p in problems:
        print(f"PROBLEM: {p}")
    if problems:
        return 1
    if args.mode == "check":
        return 0
    if not args.build:
        ap.error("run needs --build")
    return run_all(args, blocks, table)


if __name__ == "__main__":
    sys.exit(main())
