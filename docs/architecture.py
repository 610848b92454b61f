#!/usr/bin/python3
"""The figures of docs/architecture.md, measured, so that they cannot drift.

  docs/architecture.py lengths [--over N]   every library/tool function over N lines (ctags)
  docs/architecture.py check                fails (exit 1, one line per problem) when
      - a function in aggregator/ analysis/ collector/ launch/ is over 150 lines,
      - the measured list in docs/architecture.md differs from `lengths --over 120`,
      - a room (a folder or a folder's room: aggregator/store/, analysis/html/, ...) links a room
        listed after it in "Folder dependency order", or one of its files includes a header of
        such a room (either would be a cycle), or a room with sources is not listed.
  docs/architecture.py update               rewrites the measured list in docs/architecture.md

Function length: head line to closing brace, as universal-ctags reports them (`--fields=+ne`:
the `line` and `end` fields), for C and C++ definitions (kind f). Lambdas are part of the function
that holds them. Run by tests/cli/test_architecture.sh (ctest cli.test_architecture, so CI).
"""
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "architecture.md")
FOLDERS = ["aggregator", "analysis", "collector", "launch"]  # the library and tool sources
LIMIT = 150  # the developers' rule: no library or tool function over 150 lines
LISTED = 120  # the doc lists every function over this, so the next ones to cut are in sight
BEGIN = "<!-- measured by docs/architecture.py (ctags); `docs/architecture.py update` rewrites it -->"
END = "<!-- end of measured list -->"


def ctags():
    exe = shutil.which("ctags-universal") or shutil.which("ctags")
    if not exe:
        sys.exit("docs/architecture.py: ctags not found (apt-get install universal-ctags)")
    out = subprocess.run(
        [exe, "--output-format=json", "--fields=+ne", "--languages=C,C++", "--langmap=C++:+.cu",
         "--kinds-C=f", "--kinds-C++=f", "-R", "-f", "-"] + FOLDERS,
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return out


def functions():
    """(lines, path, qualified name, first line) of every function definition, longest first."""
    rows = []
    for line in ctags().splitlines():
        tag = json.loads(line)
        if tag.get("_type") != "tag" or "end" not in tag:
            continue
        scope = tag.get("scope", "")
        # Anonymous namespaces read as __anon<hash>: the name without them is stable.
        scope = "::".join(p for p in scope.split("::") if p and not p.startswith("__anon"))
        name = f"{scope}::{tag['name']}" if scope else tag["name"]
        rows.append((tag["end"] - tag["line"] + 1, tag["path"], name, tag["line"]))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    return rows


def measured_list(over):
    return [f"- `{name}` ({path}): {n} lines" for n, path, name, _ in functions() if n > over]


def doc_block(text):
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        return None
    return [l for l in text[i + len(BEGIN):j].splitlines() if l.strip()]


def folder_order(text):
    """Folder → position in the doc's "Folder dependency order" list (1., 2., ...)."""
    sec = text.split("## Folder dependency order", 1)[1].split("\n## ", 1)[0]
    order = {}
    for m in re.finditer(r"^(\d+)\. (.*)$", sec, re.M):
        head = m.group(2).split(" — ")[0]
        for f in re.findall(r"`([\w./-]+)/`", head):
            order[f] = int(m.group(1))
    return order


def room_of(rel, order):
    """The room a path belongs to: its longest leading folder path listed in the order."""
    parts = rel.split("/")
    for k in range(len(parts), 0, -1):
        if "/".join(parts[:k]) in order:
            return "/".join(parts[:k])
    return parts[0]


def include_edges(order):
    """(room, included room, file, header) for every #include "kernalyse/X.h" of our sources."""
    where = {}  # header name → room that holds it
    sources = []
    for folder in FOLDERS:
        for dirpath, dirs, files in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
            for name in files:
                rel = os.path.relpath(os.path.join(dirpath, name), ROOT)
                if name.endswith((".h", ".hpp")) and "/include/kernalyse/" in rel:
                    where[name] = room_of(rel, order)
                if name.endswith((".cpp", ".h", ".hpp", ".cu")):
                    sources.append(rel)
    edges = []
    for rel in sources:
        text = open(os.path.join(ROOT, rel), errors="replace").read()
        for h in re.findall(r'#include "kernalyse/([\w.]+)"', text):
            if h in where and where[h] != room_of(rel, order):
                edges.append((room_of(rel, order), where[h], rel, h))
    return edges


def cmake_links(order):
    """(linking folder, linked folder) for every target_link_libraries of our targets."""
    owner = {}  # target or alias → folder
    links = []  # (folder, text of a target_link_libraries call)
    for dirpath, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build")) and d != "vendor"
                   and not os.path.exists(os.path.join(dirpath, d, "CMakeCache.txt"))]
        if "CMakeLists.txt" not in files:
            continue
        rel = os.path.relpath(dirpath, ROOT)
        if rel == ".":
            continue
        folder = room_of(rel.replace(os.sep, "/"), order)
        text = re.sub(r"#[^\n]*", "", open(os.path.join(dirpath, "CMakeLists.txt")).read())
        for m in re.finditer(r"add_(?:library|executable)\(\s*([\w:.-]+)(?:\s+ALIAS\s+([\w:.-]+))?",
                             text):
            owner[m.group(1)] = folder
            if m.group(2):
                owner[m.group(1)] = owner.get(m.group(2), folder)
        for m in re.finditer(r"(?:target_link_libraries|add_dependencies)\(([^)]*)\)", text):
            links.append((folder, m.group(1).split()))
    pairs = set()
    for folder, words in links:
        for w in words[1:]:
            if w in owner and owner[w] != folder:
                pairs.add((folder, owner[w], w))
    return pairs


def check():
    problems = []
    for n, path, name, line in functions():
        if n > LIMIT:
            problems.append(f"{path}:{line}: {name} is {n} lines (limit {LIMIT})")
    text = open(DOC).read()
    block = doc_block(text)
    want = measured_list(LISTED) or ["- (none)"]
    if block is None:
        problems.append(f"{DOC}: no measured list (markers {BEGIN!r} ... {END!r})")
    elif block != want:
        problems.append(f"{DOC}: the measured list differs from the sources "
                        "(docs/architecture.py update rewrites it):\n  doc:      " +
                        "\n            ".join(block or ["(empty)"]) + "\n  measured: " +
                        "\n            ".join(want or ["(empty)"]))
    order = folder_order(text)
    for folder, dep, target in sorted(cmake_links(order)):
        if folder not in order or dep not in order:
            problems.append(f"folder dependency order: {folder}/ or {dep}/ not listed in {DOC}")
        elif order[dep] > order[folder]:
            problems.append(f"folder dependency order: {folder}/ links {target} of {dep}/, "
                            f"which comes after it ({order[dep]} > {order[folder]})")
    for room, dep, rel, h in sorted(include_edges(order)):
        if room not in order or dep not in order:
            problems.append(f"folder dependency order: {room}/ or {dep}/ not listed in {DOC}")
        elif order[dep] > order[room]:
            problems.append(f"folder dependency order: {rel} (in {room}/) includes kernalyse/{h} "
                            f"of {dep}/, which comes after it ({order[dep]} > {order[room]})")
    for p in problems:
        print(p)
    return 1 if problems else 0


def update():
    text = open(DOC).read()
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        sys.exit(f"{DOC}: no measured list markers")
    lines = measured_list(LISTED) or ["- (none)"]
    new = text[:i + len(BEGIN)] + "\n" + "\n".join(lines) + "\n" + text[j:]
    open(DOC, "w").write(new)


def main(argv):
    if len(argv) >= 2 and argv[1] == "lengths":
        over = int(argv[3]) if len(argv) >= 4 and argv[2] == "--over" else LISTED
        print("\n".join(measured_list(over)))
        return 0
    if argv[1:] == ["check"]:
        return check()
    if argv[1:] == ["update"]:
        update()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
