"""Measurement tools shared by the benchmark, check and experiment drivers,
and those drivers (their command lines: lab.cli, run by the scripts in scripts/):

  timing      the one timing loop (CPU perf_counter, CUDA events, warm-up, budget)
  memory      peak memory of a call or a block (torch's allocator, resident set)
  provenance  machine, versions, load, and the git revision of a checkout the caller names
  report      results folders, a JSON document kept on disk as it grows (LiveJson), plots
  ops, ops_report   the operator benchmark (scripts/bench_ops.py)
  floor       the CPU op against the hardware's FFT floor (scripts/bench_ops.py --floor)
  crossover   the CPU direct/FFT crossover (scripts/bench_crossover.py)
  decode      the decoding benchmark (scripts/bench_decode.py)
  compile     a drop-in model's training step, eager vs torch.compile (scripts/bench_compile.py)
  limits      the longest sequence per model (scripts/resource_limits.py)
  distill_report  distilled decoding: quality and latency (scripts/distill_report.py)
  gpu_check   the one-shot GPU check's checks and verdict (scripts/gpu_check.sh,
              gpu_check.py; the repository's tests run by gpu_check/pytest_run.py)

Pure Python and torch: importable without the native build (the drivers
that time tmm's op need it, of course).
"""
