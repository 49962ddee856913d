"""The experiment drivers: library code behind ``scripts/compare.py``,
``scripts/retention.py`` and ``scripts/fredholm.py`` (each command line, in
:mod:`lab.cli`, is argument parsing, one call into this package, and
printing). Results, tables and plots: docs/experiments.md.

- :mod:`~lab.experiments.claims`: the paper's claims tested, one suite
  (``ClaimsSettings``, ``run_claims``; ``scripts/claims.py``) of comparisons
  and retention runs with a verdict per claim, resumable, budgets in steps.
- :mod:`~lab.experiments.compare`: the baseline comparison
  (``CompareSettings``, ``run_comparison``): architectures matched by
  parameter count, trained on one task with the same batches; resume,
  torchrun, time budgets; metrics.jsonl, summary.md/json, plots.
- :mod:`~lab.experiments.ablation`: the TMM variants of the zoo's
  ablation/ configs compared by that driver (``run_ablation``).
- :mod:`~lab.experiments.retention`: information extraction and capacity
  through one vector (``RetentionSettings``, ``run_retention``; ``run`` for
  a dict), in two decoder modes (the BatchNorm decoder, the authors'
  unroll bottleneck and masked mixers), with the autoencoder of
  :mod:`~lab.experiments.retention_model`.
- :mod:`~lab.experiments.operator_index`: the Fredholm-index analysis of a
  TMM checkpoint or config (``analyse``).

Shared by the drivers: :mod:`.model_configs` (zoo configs fitted to a task),
:mod:`.budget` (time budgets), :mod:`.saved_settings` (the settings check
of a resumed run or a reused claims job), :mod:`.distributed` (torchrun),
:mod:`.formatting`, :mod:`.task_options`, and :class:`.errors.SettingsError`,
the error for bad settings that scripts print after their name; and from
:mod:`lab.bench`, provenance (git, machine, load), peak memory, the results
folders and plots; tables from :mod:`tmm.tables`. Nothing here knows where a
source checkout is: a driver records the git revision of the ``repo`` its
caller names (lab.cli passes the checkout, ``lab.REPO``).
"""
