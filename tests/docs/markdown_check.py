#!/usr/bin/env python3
"""The documentation's shape, checked (markdown_check_test, label cpu):

- size: no Markdown file over its budget. Every README.md: 12 KiB, a few
  screens (the top one: what MixNet is, the two commands, what the demo
  prints, who reads what; a component's: what it is, how to use and test it,
  its limits). Every other Markdown file (guides, docs/design/, RESULTS.md):
  16 KiB. A guide that outgrows it splits by audience, design rationale goes
  to docs/design/, figures to the benchmark's RESULTS.md, one current entry
  per command.
- links: every relative link in the Markdown ([text](path), [text](path#a),
  [text](#a)) names a file or folder of the checkout, and an anchor names a
  heading of the Markdown file it points into (GitHub's heading ids).
- settings: docs/settings.md has one row per variable of the settings
  table (runtime/common/settings.h, where the runtime reads them) and no
  other; a MIXNET_* variable a program reads elsewhere (getenv) is named
  somewhere under docs/.
- no work-log labels ("stop" or "session" and a number or a date) in any
  text file of the checkout: the history of the work is in git and the
  issue notes.

Usage: markdown_check.py --source DIR
"""

import argparse
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the sources
from doc_commands import SKIP_DIRS, markdown_files  # noqa: E402

README_BUDGET = 12 * 1024
DEFAULT_BUDGET = 16 * 1024
TEXT_EXTENSIONS = (".md", ".cc", ".h", ".cu", ".cuh", ".py", ".sh", ".txt", ".cmake", ".yaml",
                   ".yml", ".proto", ".json", ".in", ".service", ".conf")
WORK_LOG = re.compile(r"\b(?:stop|session)\s+(?:#?\d+\b|of\s+\d{4}-\d\d-\d\d)", re.IGNORECASE)
LINK = re.compile(r"(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```+|~~~+)")


def outside_fences(text):
    """(line number, line) of the lines outside fenced blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif line.strip().startswith(fence):
                fence = None
        elif fence is None:
            yield n, line


def prose_lines(text):
    """outside_fences, with code spans blanked."""
    for n, line in outside_fences(text):
        yield n, re.sub(r"`[^`]*`", lambda s: " " * len(s.group(0)), line)


def heading_ids(text):
    """GitHub's ids of a file's headings: lower case, punctuation dropped,
    spaces to '-', a repeated id numbered -1, -2, ..."""
    ids, seen = set(), {}
    for _, line in outside_fences(text):
        h = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not h:
            continue
        slug = h.group(1).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", slug).replace(" ", "-")
        k = seen.get(slug, 0)
        seen[slug] = k + 1
        ids.add(slug if k == 0 else f"{slug}-{k}")
    return ids


def check_links(source, rel, text, id_cache):
    problems = []
    here = os.path.dirname(rel)
    lines = dict(prose_lines(text))
    prose = "\n".join(lines.get(n, "") for n in range(1, text.count("\n") + 2))
    for m in LINK.finditer(prose):  # a link's text may wrap onto the next line
        n = prose.count("\n", 0, m.start()) + 1
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(here, path)) if path else rel
        full = os.path.join(source, dest)
        if dest.startswith("..") or not os.path.exists(full):
            problems.append(f"{rel}:{n}: link to {target}: {dest} is not in the checkout")
            continue
        if anchor and dest.endswith(".md"):
            if dest not in id_cache:
                with open(full, encoding="utf-8") as f:
                    id_cache[dest] = heading_ids(f.read())
            if anchor not in id_cache[dest]:
                problems.append(f"{rel}:{n}: link to {target}: {dest} has no heading #{anchor}")
    return problems


def check_settings(source):
    problems = []
    header = os.path.join(source, "runtime/common/settings.h")
    doc = os.path.join(source, "docs/settings.md")
    with open(header, encoding="utf-8") as f:
        table = set(re.findall(r'X\(\s*[^,]+,\s*\w+,\s*"(MIXNET_[A-Z0-9_]+)"', f.read()))
    if not table:
        return [f"{header}: no settings table found (MIXNET_SETTINGS_TABLE)"]
    with open(doc, encoding="utf-8") as f:
        rows = set(re.findall(r"^\|\s*`(MIXNET_[A-Z0-9_]+)`", f.read(), re.MULTILINE))
    for name in sorted(table - rows):
        problems.append(f"docs/settings.md: no row for {name} (runtime/common/settings.h reads it)")
    for name in sorted(rows - table):
        problems.append(f"docs/settings.md: row {name} is not in runtime/common/settings.h's table")
    docs_text = ""
    for rel in markdown_files(source):
        if rel.startswith("docs/"):
            with open(os.path.join(source, rel), encoding="utf-8") as f:
                docs_text += f.read()
    for rel in text_files(source):
        if not rel.endswith((".cc", ".h", ".cu", ".py")):
            continue
        with open(os.path.join(source, rel), encoding="utf-8", errors="replace") as f:
            for name in set(re.findall(r'getenv\(\s*"(MIXNET_[A-Z0-9_]+)"', f.read())):
                if name not in table and name not in docs_text:
                    problems.append(f"{rel}: reads {name}, which nothing under docs/ names")
    return problems


def text_files(source):
    for root, dirs, files in os.walk(source):
        dirs[:] = sorted(
            d for d in dirs
            if d not in SKIP_DIRS and not d.startswith((".", "build"))
            and not os.path.exists(os.path.join(root, d, "CMakeCache.txt")))
        for f in sorted(files):
            if f.endswith(TEXT_EXTENSIONS):
                yield os.path.relpath(os.path.join(root, f), source)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    problems, id_cache, sizes = [], {}, []
    for rel in markdown_files(args.source):
        with open(os.path.join(args.source, rel), encoding="utf-8") as f:
            text = f.read()
        size = len(text.encode("utf-8"))
        budget = README_BUDGET if os.path.basename(rel) == "README.md" else DEFAULT_BUDGET
        sizes.append((size, rel))
        if size > budget:
            problems.append(f"{rel}: {size} bytes, over its budget of {budget} "
                            "(split it by audience, move design rationale to docs/design/ or figures to a RESULTS.md)")
        problems += check_links(args.source, rel, text, id_cache)
    problems += check_settings(args.source)
    for rel in text_files(args.source):
        with open(os.path.join(args.source, rel), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = WORK_LOG.search(line)
                if m:
                    problems.append(f"{rel}:{n}: work-log label {m.group(0)!r}; say what, not when")
    sizes.sort(reverse=True)
    print(f"markdown: {len(sizes)} files, {sum(s for s, _ in sizes)} bytes; largest: "
          + ", ".join(f"{r} {s}" for s, r in sizes[:5]))
    for p in problems:
        print(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
