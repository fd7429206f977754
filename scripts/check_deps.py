#!/usr/bin/env python3
"""Checks the component boundaries (issue 16, item 11). The build enforces most of them through its
include paths (cmake/GristHelpers.cmake: each target sees the public headers of what it links and
its own folder, never the source root); this script checks what the paths cannot, and with --build
that the paths do what they promise:

1. A library's direct includes of other components match its CMake DEPS/PRIVATE_DEPS: every
   component it includes is a dependency, and every grist dependency is included somewhere.
2. No file outside component X includes X/internal/ headers, except X's own tests (tests/X/) and
   the fuzz targets (which test internals by design).
3. tools/, bench/ and python/ include public headers only.
4. CMake names no folder that does not exist: every add_subdirectory() and every folder of a
   `foreach(component ...)` list that is added as a subdirectory is there.
5. With --build DIR (a configured build folder with compile_commands.json): no compile command
   has the source root as an include directory, and an X/internal/ header is reachable through a
   command's include directories only for X's own sources, X's tests (tests/X/) and fuzz/.

Run by ctest (`component_boundaries`, with --build) and by the build itself (the
`component_boundaries_check` target, part of ALL), so a violation fails `cmake --build`.

Usage: scripts/check_deps.py [SOURCE_ROOT] [--build DIR]. Prints each violation; exit status 1 if
any.
"""
import json
import os
import re
import shlex
import sys

args = sys.argv[1:]
build = None
if "--build" in args:
    i = args.index("--build")
    build = os.path.abspath(args[i + 1])
    del args[i:i + 2]
root = args[0] if args else os.path.join(os.path.dirname(__file__), "..")
root = os.path.abspath(root)
# Known violations, each to be removed by the change that fixes it (not a place for new ones).
ALLOWED = set()
LOOPED = {}  # component dir -> dependencies added by a loop "if the target exists" (may go unused)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = (".cc", ".h")


def components():
    out = {}
    for d in sorted(os.listdir(root)):
        cm = os.path.join(root, d, "CMakeLists.txt")
        if not os.path.isfile(cm):
            continue
        text = open(cm, encoding="utf-8").read()
        for m in re.finditer(r"grist_cc_library\((.*?)\n\)", text, re.S):
            body = m.group(1)
            name = re.search(r"NAME\s+(\S+)", body).group(1)
            deps = set(re.findall(r"grist::(\w+)", body))
            if "${" in body and "grist::${component}" in text:
                # Dependencies gathered in a loop: foreach(component a b c) ... grist::${component}.
                loop = re.search(r"foreach\(component ([^)]*)\)", text)
                looped = set(loop.group(1).split()) if loop else set()
                deps |= looped | set(re.findall(r"grist::(\w+)", text))
                LOOPED.setdefault(d, set()).update(looped)
            # A folder that also builds an executable (tools/: the `grist` binary beside grist::cli)
            # owns, as the library, only the files its SRCS and HDRS name.
            own = None
            if "add_executable(" in text:
                listed = re.search(r"SRCS(.*?)(?:\n\s*[A-Z]+\s|$)", body, re.S)
                headers = re.search(r"HDRS(.*?)(?:\n\s*[A-Z]+\s|$)", body, re.S)
                own = set()
                for g in (listed, headers):
                    if g:
                        own |= {os.path.join(root, d, f) for f in g.group(1).split()}
            out[d] = (name, deps, own)
    return out


def files_under(d):
    for base, _, names in os.walk(os.path.join(root, d)):
        for n in names:
            if n.endswith(SOURCES):
                yield os.path.join(base, n)


def includes(path):
    return INCLUDE.findall(open(path, encoding="utf-8", errors="replace").read())


def missing_folders():
    """Folders a CMakeLists.txt adds (add_subdirectory, or a foreach list fed to it) that do not exist."""
    out = []
    for base, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")
                   and d not in ("out", "node_modules")]
        if "CMakeLists.txt" not in names:
            continue
        cm = os.path.join(base, "CMakeLists.txt")
        text = open(cm, encoding="utf-8").read()
        rel = os.path.relpath(cm, root)
        for m in re.finditer(r"add_subdirectory\(\s*([^)\s]+)", text):
            arg = m.group(1)
            if arg.startswith("${"):
                continue
            if not os.path.isfile(os.path.join(base, arg, "CMakeLists.txt")):
                out.append(f"{rel}: add_subdirectory({arg}) names a folder without a CMakeLists.txt")
        for m in re.finditer(r"foreach\((\w+) ([^)]*)\)(.*?)endforeach", text, re.S):
            var, items, body = m.group(1), m.group(2).split(), m.group(3)
            if f"add_subdirectory(${{{var}}})" not in body:
                continue
            for item in items:
                if not os.path.isfile(os.path.join(base, item, "CMakeLists.txt")):
                    out.append(f"{rel}: foreach({var} ...) lists {item}, which has no CMakeLists.txt")
    return out


def include_dirs(command):
    """The -I/-isystem/-iquote directories of one compile command, in order."""
    words = shlex.split(command)
    out = []
    for i, w in enumerate(words):
        for flag in ("-I", "-isystem", "-iquote"):
            if w == flag and i + 1 < len(words):
                out.append(words[i + 1])
            elif w.startswith(flag) and len(w) > len(flag) and flag == "-I":
                out.append(w[len(flag):])
    return out


def include_path_problems(comps):
    """What the build's include directories let a source reach that it must not (check 5)."""
    db = os.path.join(build, "compile_commands.json")
    if not os.path.isfile(db):
        return [f"--build {build}: no compile_commands.json (configure the build first)"]
    internal = {}  # component dir -> its internal headers, as included ("dedup/internal/files.h")
    for d in comps:
        base = os.path.join(root, d, "internal")
        if os.path.isdir(base):
            internal[d] = sorted(f"{d}/internal/{n}" for n in os.listdir(base) if n.endswith(".h"))
    out = []
    for entry in json.load(open(db, encoding="utf-8")):
        src = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
        rel = os.path.relpath(src, os.path.realpath(root))
        if rel.startswith(".."):
            continue
        command = entry.get("command") or " ".join(shlex.quote(a) for a in entry["arguments"])
        dirs = [os.path.join(entry["directory"], d) for d in include_dirs(command)]
        real = {os.path.realpath(d) for d in dirs}
        if os.path.realpath(root) in real:
            out.append(f"{rel}: compiled with the source root as an include directory")
        top = rel.split(os.sep)[0]
        for owner, headers in internal.items():
            if top in (owner, "fuzz") or rel.startswith(f"tests/{owner}/"):
                continue
            for h in headers:
                if any(os.path.exists(os.path.join(d, h)) for d in dirs):
                    out.append(f"{rel}: its include directories reach {h}, private to {owner}/")
                    break
    return out


def main():
    comps = components()
    problems = []
    for d, (name, deps, own) in comps.items():
        used = set()
        for f in files_under(d):
            if own is not None and f not in own:
                continue
            for inc in includes(f):
                top = inc.split("/")[0]
                if top == d or top not in comps:
                    continue
                used.add(top)
                if top not in deps:
                    problems.append(f"{os.path.relpath(f, root)}: includes {inc} but grist::{name} "
                                    f"does not depend on grist::{comps[top][0]}")
        for dep in sorted(deps - {name} - LOOPED.get(d, set())):
            dep_dir = next((k for k, v in comps.items() if v[0] == dep), None)
            if dep_dir is not None and dep_dir not in used:
                problems.append(f"{d}/CMakeLists.txt: grist::{name} depends on grist::{dep}, "
                                f"which it never includes")
    for top in ["tools", "bench", "python", "tests", "fuzz"] + sorted(comps):
        if not os.path.isdir(os.path.join(root, top)):
            continue
        for f in files_under(top):
            rel = os.path.relpath(f, root)
            for inc in includes(f):
                parts = inc.split("/")
                if len(parts) < 3 or parts[1] != "internal" or parts[0] not in comps:
                    continue
                owner = parts[0]
                if top == owner or top == "fuzz" or rel.startswith(f"tests/{owner}/"):
                    continue
                problems.append(f"{rel}: includes {inc}, private to {owner}/")
    problems += missing_folders()
    if build is not None:
        problems += include_path_problems(comps)
    problems = sorted(set(p for p in problems if p not in ALLOWED))
    for p in problems:
        print(p)
    if problems:
        print(f"check_deps: {len(problems)} boundary violation(s)", file=sys.stderr)
        return 1
    print(f"check_deps: {len(comps)} components, boundaries hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
