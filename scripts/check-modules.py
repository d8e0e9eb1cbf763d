#!/usr/bin/env python3
"""Fails when the module graph and docs/architecture.md disagree, or when a rule of the graph
is broken.

Package.swift is the authority on what each target may import (an import a target does not
declare does not build); docs/architecture.md's map ("A newcomer's map") says the same in
tables whose rows start with the target's folder in backquotes (C modules that belong to it
as `(+ \\`CName\\`)`) and whose last cell lists, in backquotes, the targets it depends on, or
says "nothing of ours". This script reads the dependencies from `swift package dump-package`
(JSON) and fails when:

  - a target of Sources/ has no row, or a row names no target;
  - a row's dependencies differ from the target's in Package.swift;
  - a Swift file imports a target of ours its target does not declare (SwiftPM lets a module
    see every module its dependencies see, so such an import builds and the graph lies), or
    a target declares one that none of its files imports;
  - a rule below is broken: values below behaviour (the settings and config reader depend,
    even through others, on none of the modules that do I/O on the loop or run services);
    MCP does not depend on Upstream; the log imports no I/O; Broker and Config know
    nothing of each other.

Usage: scripts/check-modules.py [--dump FILE] [--doc FILE]
  --dump FILE: the JSON of `swift package dump-package` (default: run it, with $SWIFT or swift)
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# (target, what it must not depend on, directly or through others, and why); a name ending
# in "!" is forbidden only as a direct dependency.
RULES = [
    ("DaemonSettings", {"Upstream", "Curl", "EventLoop", "MCP", "Broker", "Config"}, "settings are values"),
    ("ServiceSettings", {"Upstream", "Curl", "EventLoop", "MCP", "Posix"}, "the services' settings are values"),
    ("Config", {"Upstream", "Curl", "EventLoop", "MCP", "Broker"}, "the config reader makes values"),
    ("MCP", {"Upstream"}, "MCP reads SSE through the SSE module, not the model servers' client"),
    ("ConfabLog", {"Posix", "EventLoop", "Curl"}, "the log does no I/O of its own"),
    ("SSE", {"Posix", "EventLoop", "Curl"}, "the SSE parser does no I/O"),
    ("Broker", {"Config", "Curl!"}, "the broker runs on settings, whoever read them, and makes no libcurl handle"),
    ("ConfabProtocol", None, "the protocol builds alone"),
]


def dump_package(path):
    if path:
        with open(path) as f:
            return json.load(f)
    swift = os.environ.get("SWIFT", "swift")
    # A scratch directory of its own: the build's lock is not waited for.
    scratch = os.path.join(ROOT, ".build", "check-modules")
    out = subprocess.run([swift, "package", "--package-path", ROOT, "--scratch-path", scratch, "dump-package"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def package_graph(package):
    """Every non-test target and the names of the targets of this package it depends on."""
    names = {t["name"] for t in package["targets"]}
    graph = {}
    for target in package["targets"]:
        if target["type"] == "test":
            continue
        deps = set()
        for dep in target.get("dependencies", []):
            for kind in ("byName", "target"):
                if kind in dep and dep[kind][0] in names:
                    deps.add(dep[kind][0])
        graph[target["name"]] = deps
    return graph


def doc_rows(path):
    """{target: (dependencies, line)} from the map's tables, and each C companion's owner."""
    with open(path) as f:
        lines = f.read().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("## A newcomer's map"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    rows, companions = {}, {}
    for number in range(start, end):
        line = lines[number]
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        first = re.match(r"`([^`]+)`", cells[0])
        target = first.group(1)
        for companion in re.findall(r"\(\+ `([^`]+)`\)", cells[0]):
            companions[companion] = target
        last = cells[-1]
        deps = set() if last.startswith("nothing of ours") else set(re.findall(r"`([^`]+)`", last))
        if target in rows:
            sys.exit(f"check-modules: {path}:{number + 1}: `{target}` has a second row")
        rows[target] = (deps, number + 1)
    return rows, companions


def source_imports(package):
    """{target: {module: first file importing it}} for the Swift targets of Sources/."""
    found = {}
    for target in package["targets"]:
        if target["type"] == "test":
            continue
        folder = os.path.join(ROOT, target.get("path") or os.path.join("Sources", target["name"]))
        imports = {}
        for directory, _, files in os.walk(folder):
            for name in sorted(files):
                if not name.endswith(".swift"):
                    continue
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as f:
                    for line in f:
                        match = re.match(r"\s*(?:@testable\s+|@_exported\s+)?import\s+(?:(?:struct|class|enum|func|protocol|typealias|var|let)\s+)?([A-Za-z_][A-Za-z0-9_]*)", line)
                        if match:
                            imports.setdefault(match.group(1), os.path.relpath(path, ROOT))
        found[target["name"]] = imports
    return found


def reachable(graph, start):
    seen, todo = set(), list(graph.get(start, ()))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph.get(name, ()))
    return seen


def path_to(graph, start, goal):
    """One chain of dependencies from start to goal, for the message."""
    todo, came = [start], {start: None}
    while todo:
        name = todo.pop(0)
        if name == goal:
            chain = []
            while name is not None:
                chain.append(name)
                name = came[name]
            return " -> ".join(reversed(chain))
        for dep in sorted(graph.get(name, ())):
            if dep not in came:
                came[dep] = name
                todo.append(dep)
    return goal


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dump")
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs", "architecture.md"))
    args = parser.parse_args()
    package = dump_package(args.dump)
    graph = package_graph(package)
    rows, companions = doc_rows(args.doc)
    problems = []
    doc = os.path.relpath(args.doc)

    for target, deps in sorted(graph.items()):
        if target in rows:
            written, line = rows[target]
            if written != deps:
                missing, extra = sorted(deps - written), sorted(written - deps)
                said = []
                if missing:
                    said.append("Package.swift also has " + ", ".join(missing))
                if extra:
                    said.append("Package.swift does not have " + ", ".join(extra))
                problems.append(f"{doc}:{line}: `{target}` may import: {'; '.join(said)}")
        elif target in companions:
            # A C module beside its Swift one: it depends on nothing of ours.
            if deps:
                problems.append(f"{doc}: `{target}` (beside `{companions[target]}`) depends on {', '.join(sorted(deps))}: give it a row")
        else:
            problems.append(f"{doc}: no row for target `{target}` (Package.swift: {', '.join(sorted(deps)) or 'nothing of ours'})")
    for target, (_, line) in sorted(rows.items()):
        if target not in graph:
            problems.append(f"{doc}:{line}: `{target}` is no target of Package.swift")
    for companion, owner in sorted(companions.items()):
        if companion not in graph:
            problems.append(f"{doc}: `{companion}` (beside `{owner}`) is no target of Package.swift")

    for target, imports in sorted(source_imports(package).items()):
        declared = graph[target]
        has_swift = bool(imports) or any(f.endswith(".swift") for _, _, fs in os.walk(os.path.join(ROOT, "Sources", target)) for f in fs)
        for module, path in sorted(imports.items()):
            if module in graph and module != target and module not in declared:
                problems.append(f"{path}: imports {module}, which Package.swift does not give `{target}`")
        if has_swift:
            for module in sorted(declared - set(imports)):
                problems.append(f"Package.swift: `{target}` depends on {module}, which none of its Swift files imports")

    for target, forbidden, why in RULES:
        if target not in graph:
            problems.append(f"Package.swift: no target `{target}`, which a rule names")
            continue
        below = reachable(graph, target)
        if forbidden is None:
            bad = sorted(below)
        else:
            bad = sorted((below & forbidden) | {name[:-1] for name in forbidden if name.endswith("!") and name[:-1] in graph[target]})
        for name in bad:
            problems.append(f"Package.swift: {path_to(graph, target, name)}: {why}")

    if problems:
        print("\n".join(problems), file=sys.stderr)
        print(f"check-modules: {len(problems)} problem(s): Package.swift is the authority; fix the graph or the map in {doc}", file=sys.stderr)
        return 1
    print(f"check-modules: {len(graph)} targets, as {doc} says; {len(RULES)} rules hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
