"""Local lm-eval tasks from a corpus's held-out text, for evaluating small
models offline, with no download: ``verse_choice`` (which of 4 second halves
follows a line's first half), ``verse_next_word`` (the next word, generated)
and ``verse_ppl`` (rolling perplexity), from the lines of the ``lm`` task's
held-out sections. docs/training.md has their definitions (section 11) and a
run (section 12).

    folder = tmm.eval.local_tasks.write_verse_tasks("tasks/")
"""
from __future__ import annotations

import json
import random
from pathlib import Path

__all__ = ["held_out_lines", "write_verse_tasks", "VERSE_TASKS"]

VERSE_TASKS = ("verse_choice", "verse_next_word", "verse_ppl")


def held_out_lines(text: str, section_bytes: int = 16384, eval_fraction: float = 0.05, min_words: int = 8):
    """The lines of at least ``min_words`` words in the ``lm`` task's held-out sections of ``text``."""
    from ..data.corpus import split_sections

    stride = round(1 / eval_fraction)
    lines = []
    for i, section in enumerate(split_sections(text.encode("utf-8"), section_bytes)):
        if i % stride == stride - 1:
            lines += [ln.strip() for ln in section.decode("utf-8", errors="replace").splitlines()
                      if len(ln.split()) >= min_words]
    return lines


def write_verse_tasks(folder, text: str | None = None, n: int = 200, seed: int = 0) -> Path:
    """Writes verses.jsonl and the three task YAMLs into ``folder`` (from ``text``, default: the default
    corpus); returns the folder, an lm-eval include path."""
    if text is None:
        from ..data.corpus import default_corpus

        text = Path(default_corpus()).read_text(encoding="utf-8")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    lines = held_out_lines(text)
    if len(lines) < 4:
        raise ValueError(f"write_verse_tasks: only {len(lines)} held-out lines of 8 words or more")
    picked = rng.sample(lines, min(n, len(lines)))
    halves = []
    for line in picked:
        words = line.split()
        cut = len(words) // 2
        halves.append((" ".join(words[:cut]), " ".join(words[cut:]), words[cut]))
    docs = []
    for i, (first, second, word) in enumerate(halves):
        others = rng.sample([h[1] for j, h in enumerate(halves) if j != i and h[1] != second], 3)
        gold = rng.randrange(4)
        choices = others[:gold] + [second] + others[gold:]
        docs.append({"context": first, "choices": choices, "gold": gold, "next_word": word, "line": picked[i]})
    data = folder / "verses.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    common = f"dataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {json.dumps(str(data.resolve()))}\ntest_split: test\n"
    (folder / "verse_choice.yaml").write_text(f"""task: verse_choice
{common}output_type: multiple_choice
doc_to_text: "{{{{context}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: gold
metric_list:
  - metric: acc
  - metric: acc_norm
""")
    (folder / "verse_next_word.yaml").write_text(f"""task: verse_next_word
{common}output_type: generate_until
doc_to_text: "{{{{context}}}}"
doc_to_target: "{{{{next_word}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 24
  do_sample: false
filter_list:
  - name: first_word
    filter:
      - function: regex
        regex_pattern: "(\\\\S+)"
      - function: take_first
metric_list:
  - metric: exact_match
""")
    (folder / "verse_ppl.yaml").write_text(f"""task: verse_ppl
{common}output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{line}}}}"
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
""")
    return folder
