"""How many answer-free gold sentences each training question can draw its in-passage negative
from, with ``dcsr.inpassage_negative: any`` and ``not_adjacent`` (not a test; demo.md, "Which
sentence is the in-passage negative").

    python benchmarks/demo/inpassage_pool.py --tokenizer results/models/dcsr-a/passage_encoder \\
        results/bm25/negatives/squad-a-train.json results/bm25/negatives/squad-b-train.json

Each question is judged as training judges it (:class:`~dcsr.training.sentence_samples.SentenceSampleBuilder`
at ``--passage-max-length``, the sentences :func:`~dcsr.data.sentences.split_sentences` finds).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from dcsr.training.sentence_samples import SentenceSampleBuilder, not_adjacent

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for benchmarks_common
from benchmarks_common import sentence_builder, sentence_builder_cli  # noqa: E402


def pools(builder: SentenceSampleBuilder, records) -> Counter:
    """Per file: trainable questions, their answer-free candidates under each rule, and how many
    questions have none (a BM25 sentence stands in)."""
    counts: Counter = Counter()
    for record in records:
        reason, with_answer, without = builder.answer_sentences(record)
        if reason is not None:
            counts["skipped"] += 1
            continue
        apart = not_adjacent(with_answer, without)
        counts["questions"] += 1
        counts["any"] += len(without)
        counts["not_adjacent"] += len(apart)
        counts["fallback_any"] += not without
        counts["fallback_not_adjacent"] += not apart
        counts["pool_shrinks"] += len(apart) < len(without)
    return counts


def main() -> None:
    a, tokenizer = sentence_builder_cli(__doc__.splitlines()[0])
    builder = sentence_builder(tokenizer, a.passage_max_length)
    print("file\tquestions\tskipped\tmean any\tmean not_adjacent\tpool shrinks\tfallback any\tfallback not_adjacent")
    for path in a.files:
        with open(path, encoding="utf-8") as f:
            c = pools(builder, json.load(f))
        n = max(c["questions"], 1)
        print(f"{path}\t{c['questions']}\t{c['skipped']}\t{c['any'] / n:.2f}\t{c['not_adjacent'] / n:.2f}\t"
              f"{c['pool_shrinks']}\t{c['fallback_any']}\t{c['fallback_not_adjacent']}")


if __name__ == "__main__":
    main()
