"""Write a dataset's dev questions (question, answers) as a DPR qas TSV, so that they can be
searched and scored as a test set (DCSR Table 8: SQuAD dev against SQuAD test)."""
import argparse

from dcsr.cli import script
from dcsr.data.variants import write_dev_questions


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dev", required=True, help="DPR biencoder dev JSON")
    ap.add_argument("--output", required=True, help="qas TSV to write")
    a = ap.parse_args()
    write_dev_questions(a.dev, a.output)


if __name__ == "__main__":
    main()
