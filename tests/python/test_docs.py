"""README.md and docs/*.md cannot drift from the code: every Python block
runs (long ones at the reduced size their marker gives), every command line
in a block or in inline code uses only flags its program has, every C++
block is extracted for the compile against the installed package
(scripts/test.sh), the pages link what exists, the README's table names
every page, and no page narrates history. tests/python/docs_snippets.py has
the markers."""
import contextlib
import importlib
import importlib.util
import inspect
import io
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import docs_snippets as ds

REPO = ds.REPO
CLI = Path(os.environ.get("TMM_CLI", REPO / "build" / "bin" / "tmm"))
PAGES = ds.pages()


# ------------------------------------------------------------------ Python blocks


def _chains():
    """Each Python block with the blocks that continue it (same namespace), by page."""
    out = []
    for page in PAGES:
        for b in ds.blocks(page):
            if b.lang != "python":
                continue
            if b.marker("continue") is not None:
                assert out and out[-1][0].page == page, f"{b.where}: 'continue' with no Python block before it"
                out[-1].append(b)
            else:
                out.append([b])
    return out


CHAINS = [c for c in _chains() if not any(b.marker("skip") is not None for b in c)]  # the rest say why they do not run


def test_the_pages_have_python_blocks():
    assert len(CHAINS) >= 15 and {c[0].page for c in CHAINS} >= {"README.md", "docs/interop.md", "docs/models.md"}


@pytest.mark.parametrize("chain", CHAINS, ids=[c[0].where for c in CHAINS])
def test_python_block_runs(chain, tmp_path, monkeypatch, restore_threads, request):
    pending = next((b.marker("pending")[0] for b in chain if b.marker("pending") is not None), None)
    if pending:
        request.applymarker(pytest.mark.xfail(reason=pending + " (when it passes, remove the page's docs-test "
                                              "pending marker)", strict=True))
    monkeypatch.chdir(tmp_path)  # files a block writes land here
    torch.manual_seed(0)
    namespace = {"__name__": "__docs__"}
    for b in chain:
        exec(compile(ds.python_code(b), b.where, "exec"), namespace)


def test_every_unrun_block_says_why():
    for page in PAGES:
        for b in ds.blocks(page):
            for name in ("skip", "pending"):
                reason = b.marker(name)
                assert reason is None or len(reason[0].split()) >= 3, f"{b.where}: docs-test {name} needs a reason"
        assert not ds.stray_markers(page), f"docs-test markers before no block: {ds.stray_markers(page)}"


SIGNATURES = [b for p in PAGES for b in ds.blocks(p) if b.marker("signatures") is not None]


@pytest.mark.parametrize("block", SIGNATURES, ids=[b.where for b in SIGNATURES])
def test_signatures_are_the_code_s(block, request):
    """A signatures block states each callable's arguments and defaults as
    inspect.signature gives them: a wrong default or a missing argument fails."""
    pending = block.marker("pending")
    if pending:
        request.applymarker(pytest.mark.xfail(reason=pending[0] + " (when it passes, remove the page's docs-test "
                                              "pending marker)", strict=True))
    module = importlib.import_module(block.marker("signatures")[0])
    for line in block.code.splitlines():
        name = line.split("(", 1)[0]
        assert line == f"{name}{inspect.signature(getattr(module, name))}", f"{block.where}: {name}"


# ------------------------------------------------------------------ command lines


def _capture(fn):
    """stdout of fn() that ends in SystemExit (argparse's --help), or the error it raised."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            fn()
    except SystemExit:
        pass
    return out.getvalue()


def _script_help(script, args):
    path = REPO / script
    saved = sys.argv
    sys.argv = [str(path), *args, "--help"]
    try:
        return _capture(lambda: runpy.run_path(str(path), run_name="__main__"))
    finally:
        sys.argv = saved


_HELP = {}


def _help(program, args=()):
    """The help text of a program (for a script, with the command's own
    arguments first, which pick its mode: bench_ops.py --floor)."""
    key = (program, tuple(args))
    if key in _HELP:
        return _HELP[key]
    if program.endswith(".py"):
        text = _script_help(program, args)
    elif program.endswith(".sh") or program.startswith(".ci/"):
        forwarded = {"scripts/run.sh": "scripts/claims.py"}.get(program)  # its extra arguments go there
        text = (REPO / program).read_text() + (_script_help(forwarded, ()) if forwarded else "")
    elif program == "torchrun":
        from torch.distributed.run import get_args_parser

        text = get_args_parser().format_help()
    elif program.startswith("tmm"):
        if not CLI.exists():
            if "TMM_CLI" in os.environ:
                pytest.fail(f"{CLI} was not built")
            pytest.skip(f"{CLI} not built (run scripts/test.sh)")
        r = subprocess.run([str(CLI), *program.split()[1:], "--help"], capture_output=True, text=True, timeout=60)
        text = r.stdout + "--version --help" if program == "tmm" else r.stdout
    elif program == "python -m tmm":  # its C++ tool behind; its own flag is in its docstring
        text = (REPO / "tmm" / "__main__.py").read_text()
    elif program.startswith("python -m "):  # a module, and its sub-command: python -m tmm.eval run
        r = subprocess.run([sys.executable, "-m", *program.split()[2:], "--help"], capture_output=True, text=True,
                           timeout=120, cwd=REPO)
        text = r.stdout
    else:
        raise AssertionError(f"no help for {program}")
    _HELP[key] = text
    return text


def _flags_of(text):
    return set(re.findall(r"(?<![\w-])--[A-Za-z][A-Za-z0-9_-]*", text))


def _exists(program):
    if program.startswith(("scripts/", ".ci/")):
        return (REPO / program).exists()
    if program.startswith("python -m "):
        return importlib.util.find_spec(program.split()[2]) is not None
    return True


@pytest.mark.parametrize("page", PAGES)
def test_command_lines_use_only_flags_their_program_has(page):
    bad = []
    for c in ds.commands(page):
        if not _exists(c.program):
            bad.append(f"{c.where}: {c.program} does not exist ({c.text})")
            continue
        if c.program.startswith("tmm ") and "unknown command" in (_help(c.program) or "unknown command"):
            bad.append(f"{c.where}: `{c.program}` is no command of the CLI")
            continue
        if not c.flags:
            continue
        known = _flags_of(_help(c.program))
        missing = [f for f in c.flags if f not in known]
        if missing and c.program.endswith(".py"):
            mode = [w for w in c.text.split() if w in c.flags[:1]]  # a mode flag first: bench_ops.py --floor
            known |= _flags_of(_help(c.program, mode))
            missing = [f for f in c.flags if f not in known]
        if missing:
            bad.append(f"{c.where}: {c.program} has no {', '.join(missing)} ({c.text})")
    assert not bad, "\n".join(bad)


def test_the_checker_catches_a_wrong_flag():
    """The flag check itself: a wrong flag and a missing script are found."""
    found = ds.commands_in("python scripts/compare.py --archs tmm --learning-rate 3", "x")
    assert [(c.program, c.flags) for c in found] == [("scripts/compare.py", ["--archs", "--learning-rate"])]
    known = _flags_of(_help("scripts/compare.py"))
    assert "--archs" in known and "--lrs" in known and "--learning-rate" not in known
    found = ds.commands_in('ARGS="--steps 3"\ntorchrun --standalone --nproc_per_node 2 scripts/compare.py $ARGS', "x")
    assert [(c.program, c.flags) for c in found] == [("torchrun", ["--standalone", "--nproc_per_node"]),
                                                     ("scripts/compare.py", ["--steps"])]
    found = ds.commands_in("tmm generate --model DIR [--greedy | --top-k K]", "x", pipes=False)
    assert [(c.program, c.flags) for c in found] == [("tmm generate", ["--model", "--greedy", "--top-k"])]
    assert not _exists("scripts/nope.py")


# ------------------------------------------------------------------ C++ blocks


def test_cpp_blocks_are_extracted_for_the_compile():
    blocks = ds.cpp_blocks()
    assert len(blocks) >= 4
    source = ds.cpp_source()
    for i, b in enumerate(blocks):
        assert (f"void snippet_{i}(" in source) == (b.marker("skip") is None), b.where
    consumer = Path(os.environ.get("TMM_CONSUMER_DIR", REPO / "build" / "consumer"))
    generated = consumer.parent / "docs_snippets" / "docs_snippets.cpp"
    if "TMM_CONSUMER_DIR" in os.environ:  # scripts/test.sh generated and compiled it from these pages
        assert generated.read_text() == source


# ------------------------------------------------------------------ the pages


def test_the_readme_table_names_every_page_and_links_exist():
    readme = (REPO / "README.md").read_text()
    for page in PAGES[1:]:
        assert f"({page})" in readme or f"`{page}`" in readme, f"README.md's docs table does not name {page}"
    for page in PAGES:
        text = (REPO / page).read_text()
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target:
                continue
            assert ((REPO / page).parent / target).exists(), f"{page}: the link {target} leads nowhere"


HISTORY = re.compile(r"issue [0-9]+|former name|until this revision|\btmm's former\b|\bformerly\b", re.I)


@pytest.mark.parametrize("page", PAGES)
def test_pages_say_what_is_not_what_was(page):
    lines = (REPO / page).read_text().splitlines()
    bad = [f"{page}:{i + 1}: {line.strip()[:100]}" for i, line in enumerate(lines) if HISTORY.search(line)]
    assert not bad, "\n".join(bad)
