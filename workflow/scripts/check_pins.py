"""Check a finished run's table against its regression pins (config/pins.yaml), printing
expected against actual for every cell; exit 1 naming each cell outside its tolerance.

    python workflow/scripts/check_pins.py --run demo --by-precision --table results/tables/dpr_dcsr.csv
    python workflow/scripts/check_pins.py --run demo --table ... --update --why "what moved it and why"
"""
import argparse
import sys
from pathlib import Path

from dcsr.cli import script
from dcsr.evaluation.pins import check_variants, failures, machine_key, report, update_pins


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pins", default=str(Path(__file__).resolve().parents[2] / "config" / "pins.yaml"))
    ap.add_argument("--run", required=True, help="the pinned run: ci or demo")
    ap.add_argument("--table", required=True, help="the run's table CSV (results/tables/<table>.csv)")
    ap.add_argument("--by-precision", action="store_true",
                    help="the run's pins for what precision auto means on this CPU: <run>-bf16 (AMX or AVX-512 BF16) or <run>-fp32")
    ap.add_argument("--update", action="store_true", help="re-pin the run to this table (with --why)")
    ap.add_argument("--why", help="with --update: why the pinned numbers move (kept in the file)")
    ap.add_argument("--drop-other-kinds", action="store_true",
                    help="with --update, when the numbers move on purpose: remove the run's variants pinned on other "
                         "kinds of CPU (<run>@<machine>: they pin the old numbers); those kinds are then compared at "
                         "the cross-kind tolerance until pinned there")
    a = ap.parse_args()
    if a.by_precision:  # the default config computes in bf16 on CPUs with AMX or AVX-512 BF16: other numbers than fp32
        from dcsr.models.precision import resolve

        a.run = f"{a.run}-{resolve('auto', 'cpu')}"
    if a.update:
        if not a.why:
            ap.error("--update needs --why: say in the pins file why the numbers move")
        dropped = update_pins(a.pins, a.run, a.table, a.why, drop_other_kinds=a.drop_other_kinds)
        print(f"re-pinned {a.run} in {a.pins} from {a.table} (made on {machine_key()})"
              + (f"; removed the other kinds' variants {', '.join(dropped)}" if dropped else ""))
        return 0
    variant, cells, problems, same = check_variants(a.pins, a.run, a.table)
    where = ("pinned on this kind of CPU" if same else
             f"no pins of this kind of CPU ({machine_key()}): the closest variant, at the cross-kind tolerance")
    print(f"regression pins of {variant!r} ({a.pins}; {where}) against {a.table}:")
    print(report(cells, problems))
    bad = failures(cells, problems)
    if bad:
        print("\n".join(["", "pinned numbers moved:"] + [f"  {b}" for b in bad]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
