"""Do the papers' real test answers pass the project's question-file reader? Public copies of the
answer sets that DPR's test files hold are written as DPR qas TSVs and read back with
``dcsr.data.formats.iter_qas``: once with the default (``bad_patterns: refuse``) and once as the
paper configs read CuratedTREC (``never_found``). For CuratedTREC, each pattern is also compiled
as DPR's ``has_answer`` compiles it (NFD, then ``re``), to check that the reader finds exactly
the patterns DPR never finds.

The inputs, from public repositories (their commits are in benchmarks/real-answers/real-answers.md):
  --curatedtrec  brmson/dataset-factoid-curated TSVs (id, type, question, pattern), e.g. large2180-test.tsv
  --nq-open      google-research-datasets/natural-questions nq_open/NQ-open.dev.jsonl (DPR's nq-test)
  --webquestions brmson/dataset-factoid-webquestions main/*.json (qId, answers, qText)
  --squad        SQuAD v1.1 JSON, or .json.gz (DPR's squad1-test is SQuAD v1.1's dev set, each question
                 with the texts of all its answers), e.g. resources/squad/squad1.1-dev-36-articles.json.gz
"""

import argparse
import gzip
import json
import re
import sys
import tempfile
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks_common import emit  # noqa: E402

from dcsr.data.answers import tokens  # noqa: E402
from dcsr.data.formats import QA, iter_qas, write_qas  # noqa: E402
from dcsr.errors import InputError  # noqa: E402


def dpr_compiles(pattern: str) -> bool:
    """Whether DPR's ``regex_match`` compiles ``pattern`` (``dpr/data/qa_validation.py``)."""
    try:
        re.compile(unicodedata.normalize("NFD", pattern), flags=re.IGNORECASE + re.UNICODE + re.MULTILINE)
    except re.error:
        return False
    return True


def read_source(kind: str, path: Path) -> list[QA]:
    if kind == "curatedtrec":
        rows = [line.rstrip("\n").split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [QA(r[2], [r[3]]) for r in rows]
    if kind == "nq-open":
        return [QA(r["question"], r["answer"]) for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())]
    if kind == "squad":
        with (gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")) as fh:
            squad = json.load(fh)
        return [QA(qa["question"], [a["text"] for a in qa["answers"]])
                for art in squad["data"]
                for par in art["paragraphs"] for qa in par["qas"]]
    return [QA(r["qText"], r["answers"]) for r in json.loads(path.read_text(encoding="utf-8"))]


def check(kind: str, path: Path, tmp: Path) -> dict:
    qas = read_source(kind, path)
    qa_file = tmp / f"{kind}-{path.stem}.qa.csv"
    write_qas(qa_file, qas)
    match = "regex" if kind == "curatedtrec" else "string"
    out = {"file": str(path), "questions": len(qas), "match": match}
    try:
        out["read_by_default"] = sum(1 for _ in iter_qas(qa_file, match))
    except InputError as e:
        out["read_by_default"] = f"refused: {e}"
    if match == "string":  # DPR matches an answer with no token in every passage
        out["answers"] = sum(len(qa.answers) for qa in qas)
        out["answers_without_a_token"] = sum(1 for qa in qas for a in qa.answers if not tokens(a))
        out["questions_without_answers"] = sum(1 for qa in qas if not qa.answers)
    if match == "regex":
        never: list = []
        out["read_with_never_found"] = sum(1 for _ in iter_qas(qa_file, match, "never_found", never))
        out["answers_never_found"] = [{"line": where.rsplit(":", 1)[1], "answer": a} for where, _, a in never]
        dpr_never = [a for qa in qas for a in qa.answers if not dpr_compiles(a)]
        out["dpr_never_compiles"] = len(dpr_never)
        out["same_as_dpr"] = sorted(dpr_never) == sorted(x["answer"] for x in out["answers_never_found"])
        # an escaped accented letter that NFD makes a valid escape (\á: \a, a bell; \ñ: \n): the
        # pattern compiles, and that alternative never matches, in DPR's code as here, without a word
        out["escaped_accent_that_compiles"] = [
            {"line": n, "answer": a} for n, qa in enumerate(qas, 1) for a in qa.answers
            if dpr_compiles(a) and any(unicodedata.normalize("NFD", c)[0].isascii()
                                       and unicodedata.normalize("NFD", c)[0].isalpha()
                                       for c in re.findall(r"\\([^\x00-\x7f])", a))]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--curatedtrec", nargs="*", default=[], type=Path)
    ap.add_argument("--nq-open", nargs="*", default=[], type=Path)
    ap.add_argument("--webquestions", nargs="*", default=[], type=Path)
    ap.add_argument("--squad", nargs="*", default=[], type=Path)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [check(kind, p, Path(tmp)) for kind, paths in
                   (("curatedtrec", a.curatedtrec), ("nq-open", a.nq_open), ("webquestions", a.webquestions),
                                   ("squad", a.squad))
                   for p in paths]
    emit({"benchmark": "real_answers", "files": results}, a.out)


if __name__ == "__main__":
    main()
