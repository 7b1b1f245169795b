"""DCSR's own sentence rule (``dcsr.splitter: dcsr``) against Blingfire (the default) on the
passages of the real-text default, and, given a checkout of the authors' code, against that
code itself (not a test).

    python benchmarks/sentence-splitting/dcsr_rule.py [--squad resources/squad/squad1.1-dev-36-articles.json.gz] \
        [--dcsr-repo PATH] [--out benchmarks/out/dcsr_rule.json]

``--dcsr-repo`` is a checkout of github.com/chengzhipanpan/DCSR: its
``downloads/data/wikipedia_split/process_ctx.py`` (which made the paper's sentence-marked corpus)
is read, and its function ``process_paragraph_v2`` alone is run on every passage (the file's
other lines read the corpus from disk and are not run). Its sentences are compared with ours,
whitespace-normalized, passage by passage.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
from benchmarks_common import emit  # noqa: E402

from dcsr.data.sentences import split_sentences  # noqa: E402
from dcsr.data.squad import squad_to_dpr  # noqa: E402

SPLITTERS = ("dcsr", "blingfire")


def authors_rule(dcsr_repo: Path):
    """``process_paragraph_v2`` of the authors' ``process_ctx.py``, the function alone."""
    source = (dcsr_repo / "downloads" / "data" / "wikipedia_split" / "process_ctx.py").read_text()
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "process_paragraph_v2")
    namespace: dict = {}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "process_ctx.py", "exec"), namespace)
    return namespace["process_paragraph_v2"]


def words(text: str) -> str:
    return " ".join(text.split())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--squad", default=str(REPO / "resources" / "squad" / "squad1.1-dev-36-articles.json.gz"))
    ap.add_argument("--dcsr-repo", type=Path, help="a checkout of chengzhipanpan/DCSR, to compare with its code")
    ap.add_argument("--out", default="benchmarks/out/dcsr_rule.json")
    a = ap.parse_args()
    texts = [p.text for p in squad_to_dpr(a.squad).passages]
    result: dict = {"passages": len(texts)}
    spans = {}
    for name in SPLITTERS:
        start = time.process_time()
        spans[name] = [split_sentences(t, name) for t in texts]
        n = sum(map(len, spans[name]))
        result[name] = {
            "sentences": n, "per_passage": round(n / len(texts), 3),
            "under_8_words": sum(len(t[s:e].split()) < 8 for t, ss in zip(texts, spans[name]) for s, e in ss),
            "max_per_passage": max(map(len, spans[name])), "cpu_s": round(time.process_time() - start, 2)}
    if a.dcsr_repo:
        rule = authors_rule(a.dcsr_repo)
        same = differ = unmarked = 0
        for text, ours in zip(texts, spans["dcsr"]):
            count, marked = rule(text)
            if count == 0:  # no <sent> left: the authors' corpus gives the passage no vector
                unmarked += 1
                continue
            theirs = [words(x) for x in marked.split("<sent>") if x.strip()]
            if [words(text[s:e]) for s, e in ours] == theirs:
                same += 1
            else:
                differ += 1
        result["authors_code"] = {"same": same, "differ": differ, "no_sentence_there": unmarked}
    emit(result, a.out)


if __name__ == "__main__":
    main()
