"""Check a finished run's table against its regression pins (config/pins.yaml), printing
expected against actual for every cell; exit 1 naming each cell outside its tolerance.

    python workflow/scripts/check_pins.py --run demo --by-precision --table results/tables/dpr_dcsr.csv
    python workflow/scripts/check_pins.py --run demo-bf16 --table ... --update --why "what moved it and why"
    python workflow/scripts/check_pins.py --kind     # the kind auto runs on this machine, and exit

The run's kind (device, compute precision, passage-encoder runtime) is the one its embedding
shards recorded (results/embeddings/*/*/shard-<n>.json), else what auto resolves to here.
"""
import argparse
import sys
from pathlib import Path

from dcsr.cli import script
from dcsr.evaluation.pins import check_variants, kind_key, kind_precision, report, table_kind, update_pins


def auto_kind() -> str:
    """The kind the default config (``auto`` device, precision and backend) runs on here."""
    import torch

    from dcsr.models.precision import resolve
    from dcsr.retrieval.embed import resolve_backend

    device = "cuda" if torch.cuda.is_available() else "cpu"
    precision = resolve("auto", device)
    return kind_key(device, precision, resolve_backend("auto", device, precision),
                    torch.cuda.get_device_name(0) if device == "cuda" else None)


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pins", default=str(Path(__file__).resolve().parents[2] / "config" / "pins.yaml"))
    ap.add_argument("--run", help="the pinned run: ci or demo")
    ap.add_argument("--table", help="the run's table CSV (results/tables/<table>.csv)")
    ap.add_argument("--kind", action="store_true", help="print the kind auto runs on this machine, and exit")
    ap.add_argument("--by-precision", action="store_true",
                    help="the run's pins for the precision the run computed in: <run>-bf16 or <run>-fp32")
    ap.add_argument("--update", action="store_true", help="re-pin the run to this table (with --why)")
    ap.add_argument("--why", help="with --update: why the pinned numbers move (kept in the file)")
    ap.add_argument("--drop-other-kinds", action="store_true",
                    help="with --update, when the numbers move on purpose: remove the run's variants pinned on other "
                         "kinds (<run>@<kind>: they pin the old numbers); those kinds are then compared at "
                         "the cross-kind tolerance until pinned there")
    a = ap.parse_args()
    if a.kind:
        print(auto_kind())
        return 0
    if not a.run or not a.table:
        ap.error("--run and --table are needed (or --kind)")
    recorded = table_kind(a.table)
    kind = recorded or auto_kind()
    source = "recorded by the run's embedding shards" if recorded else "assumed: what auto runs here (the run recorded none)"
    if a.by_precision:  # bf16 and fp32 runs of the default config pin other numbers
        a.run = f"{a.run}-{kind_precision(kind)}"
    if a.update:
        if not a.why:
            ap.error("--update needs --why: say in the pins file why the numbers move")
        target, dropped = update_pins(a.pins, a.run, a.table, a.why, drop_other_kinds=a.drop_other_kinds, kind=kind)
        print(f"re-pinned {target} in {a.pins} from {a.table} (kind {kind}, {source})"
              + (f"; removed the other kinds' variants {', '.join(dropped)}" if dropped else ""))
        return 0
    check = check_variants(a.pins, a.run, a.table, machine=kind)
    where = ("pinned on this kind" if check.same else
             "UNPINNED: no pins of this kind and no cross-kind tolerance measured for it; the closest variant is shown, "
             "and nothing fails" if check.unpinned else
             "no pins of this kind: the closest variant, at the cross-kind tolerance")
    print(f"kind: {kind} ({source})")
    print(f"regression pins of {check.variant!r} ({a.pins}; {where}) against {a.table}:")
    print(report(check.cells, check.problems))
    bad = check.failures()
    if bad:
        print("\n".join(["", "pinned numbers moved:"] + [f"  {b}" for b in bad]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
