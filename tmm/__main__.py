"""python -m tmm: the tmm command-line tool, and where its C++ package is.

    python -m tmm --cmake-prefix-path   the CMAKE_PREFIX_PATH for find_package(tmm_torch):
                                        this installed package and its torch
    python -m tmm COMMAND [options]     the C++ tool, as `tmm COMMAND` (generate, info, bench-decode)
"""
import sys

from ._launcher import cmake_prefix_path, run_tool


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--cmake-prefix-path"]:
        if len(argv) > 1:
            raise SystemExit(f"python -m tmm --cmake-prefix-path: expected no other arguments, got {argv[1:]}")
        print(cmake_prefix_path())
        return 0
    if argv[:1] in ([], ["-h"], ["--help"]):
        print(__doc__.strip() + "\n", flush=True)
        argv = ["--help"]
    run_tool(argv)


if __name__ == "__main__":
    sys.exit(main())
