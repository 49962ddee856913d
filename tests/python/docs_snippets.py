"""The code of README.md and docs/*.md as tests/python/test_docs.py runs it:
fenced blocks with their line numbers and markers, the shell commands in
them (and in inline code) with the flags they use, and the C++ blocks as one
source file that scripts/test.sh compiles against the installed package
(tests/consumer).

A marker is an HTML comment on a line of its own just before a fence,
invisible where the page is rendered; its arguments are Python string
literals:

    <!-- docs-test: continue -->                  run in the namespace of the page's previous Python block
    <!-- docs-test: before "code" -->             run this (hidden) first: files or names the block assumes
    <!-- docs-test: after "code" -->              run this (hidden) after: a check of what the block says
    <!-- docs-test: replace "old" "new" -->       run at a reduced size: each occurrence of old becomes new
    <!-- docs-test: pending "reason" -->          fails until the work the reason names lands (strict xfail:
                                                  when it passes, the run fails until the marker goes)
    <!-- docs-test: skip "reason" -->             not run (a GPU, a download); the reason says why
    <!-- docs-test: cpp-args "std::string dir" -->   a C++ block's free names, as its function's parameters
    <!-- docs-test: signatures "tmm.nn" -->       each line of the block is Name(args) as inspect.signature
                                                  gives it for that module's Name

    python tests/python/docs_snippets.py cpp OUT.cpp    writes the C++ blocks as one source file
"""
from __future__ import annotations

import ast
import dataclasses
import io
import re
import shlex
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!--\s*docs-test:\s*([a-z-]+)\s*(.*?)\s*-->\s*$")
MARKERS = {"continue": 0, "before": 1, "after": 1, "replace": 2, "pending": 1, "skip": 1, "cpp-args": 1,
           "signatures": 1}
FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)\s*$")


def pages() -> list:
    """README.md and every docs/*.md, as paths relative to the repository."""
    return ["README.md"] + sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))


@dataclasses.dataclass
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str  # "" for a fence without one
    code: str
    markers: list  # (name, args) in order

    def marker(self, name):
        """The arguments of the first marker ``name``, or None."""
        return next((args for n, args in self.markers if n == name), None)

    @property
    def where(self):
        return f"{self.page}:{self.line}"


def _marker(line, where):
    m = MARKER.match(line.strip())
    if not m:
        return None
    name, rest = m.groups()
    if name not in MARKERS:
        raise ValueError(f"{where}: unknown docs-test marker {name!r} (known: {', '.join(MARKERS)})")
    try:  # string literals side by side, each its own argument (literal_eval would join them)
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(rest).readline)
                  if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER)]
        args = tuple(ast.literal_eval(t.string) for t in tokens if t.type == tokenize.STRING)
    except (tokenize.TokenError, SyntaxError, ValueError):
        tokens, args = [None], ()
    if len(args) != MARKERS[name] or len(tokens) != len(args):
        raise ValueError(f"{where}: docs-test {name} takes {MARKERS[name]} string argument(s), got {rest!r}")
    return name, args


def blocks(page: str) -> list:
    """The fenced blocks of ``page`` with the markers on the lines just before each."""
    lines = (REPO / page).read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        markers, j = [], i - 1
        while j >= 0 and lines[j].strip().startswith("<!--"):
            found = _marker(lines[j], f"{page}:{j + 1}")
            if found:
                markers.insert(0, found)
            j -= 1
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end == len(lines):
            raise ValueError(f"{page}:{i + 1}: a fence that never closes")
        out.append(Block(page, i + 1, m.group(1), "\n".join(lines[i + 1:end]) + "\n", markers))
        i = end + 1
    return out


def stray_markers(page: str) -> list:
    """Lines holding a docs-test marker that no fence follows (a marker that would silently do nothing)."""
    lines = (REPO / page).read_text(encoding="utf-8").splitlines()
    bad = []
    for i, line in enumerate(lines):
        if MARKER.match(line.strip()):
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("<!--"):
                j += 1
            if j == len(lines) or not FENCE.match(lines[j]):
                bad.append(f"{page}:{i + 1}")
    return bad


# ------------------------------------------------------------------ Python


def python_code(block: Block) -> str:
    """The code a Python block runs: its hidden set-up, the block at its reduced size, its hidden check."""
    code = block.code
    for name, args in block.markers:
        if name == "replace":
            old, new = args
            if old not in code:
                raise ValueError(f"{block.where}: docs-test replace: {old!r} is not in the block")
            code = code.replace(old, new)
    before, after = block.marker("before"), block.marker("after")
    return (before[0] + "\n" if before else "") + code + (after[0] + "\n" if after else "")


# ------------------------------------------------------------------ shell

# The programs whose flags are checked: a command line whose first word (after
# wrappers) is one of these. Others (cmake, pip, apt-get) are not checked.
_WRAPPERS = {"nice": 0, "flock": 1, "time": 0, "sudo": 0, "exec": 0}  # name: its positional arguments
_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")


@dataclasses.dataclass
class Command:
    where: str
    program: str  # "scripts/compare.py", "tmm generate", "torchrun", "python -m tmm", ...
    flags: list  # "--name" as written, without "=value"
    text: str


def _words(line):
    try:
        return shlex.split(line, comments=True)
    except ValueError:  # an unbalanced quote in a synopsis
        return line.split()


def _flags(words):
    out = []
    for w in words:
        w = w.strip("[]()|,")
        if re.fullmatch(r"--[A-Za-z][A-Za-z0-9_-]*(=.*)?", w):
            out.append(w.split("=", 1)[0])
    return out


def _program(words):
    """(program, the words after it) of a command, or None for one that is not checked."""
    while words and (re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]) or words[0] in _WRAPPERS):
        if words[0] in _WRAPPERS:
            skip = _WRAPPERS[words[0]]
            words = words[1:]
            while words and words[0].startswith("-"):
                words = words[2:] if words[0] == "-n" else words[1:]  # nice -n N
            words = words[skip:]  # flock -x FILE: the lock file
        else:
            words = words[1:]
    if not words or any(c in words[0] + (words[1] if len(words) > 1 else "") for c in "*<>{"):
        return None  # a pattern in prose (scripts/*.py), not a command
    first = words[0]
    if first in ("python", "python3") and len(words) > 1:
        if words[1] == "-m" and len(words) > 2 and re.fullmatch(r"[A-Za-z_][\w.]*", words[2]):
            name = words[2]
            sub = words[3] if len(words) > 3 and re.fullmatch(r"[a-z][a-z-]*", words[3]) else None
            if name == "tmm" and sub:  # the C++ tool
                return f"tmm {sub}", words[4:]
            return (f"python -m {name} {sub}", words[4:]) if sub else (f"python -m {name}", words[3:])
        if words[1].startswith("scripts/"):
            return words[1], words[2:]
        return None
    if first.startswith("scripts/") or first.startswith("./scripts/"):
        return first.removeprefix("./"), words[1:]
    if first == "bash" and len(words) > 1 and words[1].startswith(("scripts/", ".ci/")):
        return words[1], words[2:]
    if first == "torchrun":
        script = next((i for i, w in enumerate(words) if w.startswith("scripts/")), None)
        if script is None:
            return "torchrun", words[1:]
        return "torchrun", words[1:script] + ["\0"] + words[script:]
    if first == "tmm" or first.endswith("/bin/tmm"):
        if len(words) > 1 and not words[1].startswith("-"):
            return f"tmm {words[1]}", words[2:]
        return "tmm", words[1:]
    return None


def _substitutions(text):
    """VAR="value" assignments of a shell block, to expand $VAR in its later lines."""
    out = {}
    for m in re.finditer(r"^([A-Z_][A-Z0-9_]*)=\"(.*?)\"\s*$", text, flags=re.M | re.S):
        out[m.group(1)] = " ".join(m.group(2).replace("\\\n", " ").split())
    return out


def commands_in(text: str, where: str, pipes: bool = True) -> list:
    """The checked commands of a shell text (continuations joined, $VAR of the
    text's assignments expanded, $(...) and each part of a pipeline or list;
    ``pipes`` False: a usage synopsis, whose ``|`` separates alternatives)."""
    subs = _substitutions(text)
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        for var, value in subs.items():
            line = line.replace(f"${var}", value)
        parts = [line] + re.findall(r"\$\(([^()]*)\)", line)
        for part in parts:
            plain = re.sub(r"\$\([^()]*\)", "X", part)
            for piece in _SPLIT.split(plain) if pipes else re.split(r"\s*(?:&&|;)\s*", plain):
                found = _program(_words(piece.strip().removeprefix("$ ")))
                if found is None:
                    continue
                program, rest = found
                if program == "torchrun" and "\0" in rest:  # torchrun's flags, then the script's
                    k = rest.index("\0")
                    out.append(Command(where, "torchrun", _flags(rest[:k]), piece.strip()))
                    program, rest = rest[k + 1], rest[k + 2:]
                out.append(Command(where, program, _flags(rest), piece.strip()))
    return out


SHELL_LANGS = {"", "bash", "sh", "shell", "console", "text"}


def commands(page: str) -> list:
    """Every checked command of a page: in its shell and text blocks, and in its inline code."""
    out = []
    for b in blocks(page):
        if b.lang in SHELL_LANGS:
            out += commands_in(b.code, b.where, pipes=b.lang != "text")
    text = (REPO / page).read_text(encoding="utf-8")
    prose = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.M | re.S)
    for m in re.finditer(r"`([^`\n]+)`", prose):
        line = prose.count("\n", 0, m.start()) + 1
        out += commands_in(m.group(1), f"{page}:{line}")
    return out


# ------------------------------------------------------------------ C++


def cpp_blocks() -> list:
    return [b for p in pages() for b in blocks(p) if b.lang == "cpp"]


def cpp_source() -> str:
    """Every C++ block not skipped, as one translation unit: its #includes
    hoisted, the rest the body of a function whose parameters are its
    cpp-args marker's (the names the block uses without declaring)."""
    includes, bodies = ["#include <string>", "#include <vector>"], []
    for i, b in enumerate(cpp_blocks()):
        if b.marker("skip") is not None:
            continue
        body = []  # each line under a #line of its page's, so that a compiler error names the page and line
        for n, line in enumerate(b.code.splitlines(), start=b.line + 1):
            if line.startswith("#include"):
                includes.append(line)
            elif line.strip():
                body.append(f'#line {n} "{b.page}"\n{line}')
        args = (b.marker("cpp-args") or ("",))[0]
        bodies.append(f"// {b.where}\n[[maybe_unused]] void snippet_{i}({args}) {{\n" + "\n".join(body) + "\n}\n")
    unique = list(dict.fromkeys(includes))
    return ("// Generated by tests/python/docs_snippets.py from README.md and docs/*.md: every C++ block,\n"
            "// compiled against the installed package (scripts/test.sh). Not run.\n"
            + "\n".join(unique) + "\n\nnamespace docs_snippets {\n\n" + "\n".join(bodies) + "\n}  // namespace docs_snippets\n")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "cpp":
        sys.exit("usage: python tests/python/docs_snippets.py cpp OUT.cpp")
    out = Path(sys.argv[2])
    out.parent.mkdir(parents=True, exist_ok=True)
    text = cpp_source()
    if not out.exists() or out.read_text() != text:  # unchanged: no rebuild
        out.write_text(text)
