"""Encoder attribution tables and figures from the pair matrix (see dcsr.attribution.report).

  table2     Table 2: tandem zero-shot            --csv --md --paper
  marginals  Figure 2 + pair-matrix heatmap       --family --csv --md --png --heatmap-png --heatmap-csv
  sweep      Figure 3: data-efficiency curves     --csv --png
  table4     Table 4: best-fraction P-encoder     --csv --md --paper
  compare    which encoder a method improves      --csv --md
"""
import argparse
import json

from dcsr.attribution.inputs import AttributionSpec, read_pair_matrix
from dcsr.attribution.report import (write_best_fraction_table, write_family_comparison, write_marginalization, write_sweep,
                                     write_tandem_table)
from dcsr.cli import script
from dcsr.errors import InputError


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["table2", "marginals", "sweep", "table4", "compare"])
    ap.add_argument("--spec", required=True, help="JSON: test sets, metrics, families, sweep, compare")
    ap.add_argument("--matrix", required=True, help="pair_matrix.csv")
    ap.add_argument("--paper", help="config/paper_numbers.yaml")
    ap.add_argument("--family")
    for out in ("csv", "md", "png", "heatmap-png", "heatmap-csv"):
        ap.add_argument(f"--{out}")
    a = ap.parse_args()
    spec = AttributionSpec.from_dict(json.loads(a.spec))
    matrix = read_pair_matrix(a.matrix)
    if a.what == "table2":
        write_tandem_table(matrix, spec, a.paper, a.csv, a.md)
    elif a.what == "marginals":
        if a.family not in spec.families:
            raise InputError("--family", f"{a.family!r} is not one of {', '.join(spec.families)}")
        write_marginalization(matrix, spec, a.family, a.csv, a.md, a.png, a.heatmap_png, a.heatmap_csv)
    elif a.what == "sweep":
        write_sweep(matrix, spec, a.csv, a.png)
    elif a.what == "table4":
        write_best_fraction_table(matrix, spec, a.paper, a.csv, a.md)
    else:
        write_family_comparison(matrix, spec, a.csv, a.md)


if __name__ == "__main__":
    main()
