"""How many training questions get other positive sentences when a sentence's answer is found
as DCSR's code finds it (``dcsr.positive_match: substring``: the lower-cased answer anywhere in
the lower-cased sentence) instead of by DPR's answer matching (``tokens``, the default); not a
test (demo.md, "How a positive sentence is labelled").

    python benchmarks/demo/positive_labels.py --tokenizer results/models/dcsr-a/passage_encoder \\
        results/bm25/negatives/squad-a-train.json results/bm25/negatives/squad-b-train.json

Each question is judged as training judges it (:class:`~dcsr.training.sentence_samples.SentenceSampleBuilder`
at ``--passage-max-length``, the sentences :func:`~dcsr.data.sentences.split_sentences` finds).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for benchmarks_common
from benchmarks_common import sentence_builder, sentence_builder_cli  # noqa: E402

RULES = ("tokens", "substring")


def labels(builders: dict, records) -> Counter:
    """Per file: questions trainable under each rule, positive candidates under each, and the
    questions whose positives differ (substring adds one, drops one)."""
    counts: Counter = Counter()
    for record in records:
        found = {rule: builders[rule].answer_sentences(record) for rule in RULES}
        counts["questions"] += 1
        for rule, (reason, with_answer, _) in found.items():
            counts[f"trainable {rule}"] += reason is None
            counts[f"positives {rule}"] += len(with_answer)
        tokens, substring = set(found["tokens"][1]), set(found["substring"][1])
        counts["adds"] += bool(substring - tokens)
        counts["drops"] += bool(tokens - substring)
    return counts


def main() -> None:
    a, tokenizer = sentence_builder_cli(__doc__.splitlines()[0])
    builders = {rule: sentence_builder(tokenizer, a.passage_max_length, positive_match=rule) for rule in RULES}
    print("file\tquestions\ttrainable tokens\ttrainable substring\tpositives tokens\tpositives substring\t"
          "substring adds a positive\tsubstring drops one")
    for path in a.files:
        with open(path, encoding="utf-8") as f:
            c = labels(builders, json.load(f))
        print(f"{path}\t{c['questions']}\t{c['trainable tokens']}\t{c['trainable substring']}\t"
              f"{c['positives tokens']}\t{c['positives substring']}\t{c['adds']}\t{c['drops']}")


if __name__ == "__main__":
    main()
