#!/usr/bin/env python3
"""Fails when a function, initializer, subscript or closure-valued property body in Sources/
(the fake upstream aside: it is a test server scripted by directives) is longer than 100
lines, counted from the line of its declaration to its closing brace. A longer body is a
sign that one function decides several things; split it so each part has a name that says
what it decides. `make test` runs this, so the rule stays true.

    scripts/check-function-length.py [--limit N] [--list]

The Swift it reads is tokenised only as far as braces need: string literals (single-line,
multi-line and raw), comments (line and nested block) are skipped, so a brace inside them
does not count.
"""

import argparse
import glob
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
EXCLUDED = ("Sources/confab-fake-upstream/",)
STARTS_DECLARATION = re.compile(r"\s*(\}|@|(public|private|fileprivate|internal|package|static|class|final|mutating|nonmutating|override|nonisolated|func|var|let|init|case|subscript|associatedtype|typealias|deinit)\b)")
DECLARATION = re.compile(r"(^|[^\w.])(func\s+[^\s(<]+|init[?!]?\s*[(<]|subscript\s*[(<]|deinit\b)")


def code_only(text):
    """The text with string literals and comments blanked (newlines kept), so braces and
    declarations are found in code only."""
    out = []
    i, n = 0, len(text)
    depth_comment = 0
    while i < n:
        c = text[i]
        if depth_comment:
            if text.startswith("/*", i):
                depth_comment += 1
                i += 2
            elif text.startswith("*/", i):
                depth_comment -= 1
                i += 2
            else:
                out.append("\n" if c == "\n" else " ")
                i += 1
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
            continue
        if text.startswith("/*", i):
            depth_comment = 1
            out.append("  ")
            i += 2
            continue
        # A string literal: `#`s, then one or three quotes.
        match = re.match(r'(#*)("""|")', text[i:i + 64])
        if match:
            hashes, quotes = match.group(1), match.group(2)
            closing = quotes + hashes
            j = i + len(match.group(0))
            while j < n:
                if text.startswith(closing, j):
                    j += len(closing)
                    break
                if text[j] == "\\" and not hashes:
                    j += 2
                    continue
                if quotes == '"' and text[j] == "\n":
                    break
                j += 1
            out.append("".join("\n" if ch == "\n" else " " for ch in text[i:j]))
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def long_bodies(path, limit):
    with open(path, encoding="utf-8") as f:
        code = code_only(f.read())
    lines = code.split("\n")
    found = []
    line_of = []  # the line number of every character offset's line start
    offsets = []
    position = 0
    for number, line in enumerate(lines, start=1):
        offsets.append(position)
        position += len(line) + 1
    for number, line in enumerate(lines, start=1):
        match = DECLARATION.search(line)
        if not match:
            continue
        # The body's opening brace: the first `{` after the declaration at bracket depth 0,
        # unless a line ends the declaration first (a protocol requirement has no body).
        start = offsets[number - 1] + match.start(2)
        depth_round = 0
        j = start
        opened = None
        while j < len(code):
            ch = code[j]
            if ch in "([":
                depth_round += 1
            elif ch in ")]":
                depth_round -= 1
            elif ch == "{" and depth_round == 0:
                opened = j
                break
            elif ch == "}" and depth_round == 0:
                break
            elif ch == "\n" and depth_round == 0 and STARTS_DECLARATION.match(code[j + 1:j + 200]):
                break  # a requirement without a body (a protocol's), followed by the next one
            j += 1
        if opened is None:
            continue
        depth = 0
        k = opened
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        end_line = code.count("\n", 0, k) + 1
        length = end_line - number + 1
        if length > limit:
            found.append((length, number, line.strip()[:80]))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--list", action="store_true", help="print every body over the limit and exit 0")
    args = parser.parse_args()
    failures = []
    for path in sorted(glob.glob(os.path.join(ROOT, "Sources", "**", "*.swift"), recursive=True)):
        relative = os.path.relpath(path, ROOT)
        if relative.startswith(EXCLUDED):
            continue
        for length, line, text in long_bodies(path, args.limit):
            failures.append("%s:%d: %d lines: %s" % (relative, line, length, text))
    for failure in failures:
        print(failure)
    if failures and not args.list:
        print("%d bodies over %d lines: split them so each part has a name that says what it decides" % (len(failures), args.limit),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
