#!/usr/bin/env bash
# Snakemake's schedulers on the miniature paper run (benchmarks/paper-mini/paper-mini.md, "ILP
# against greedy"): one `make paper-mini` run per argument, each in a fresh folder ROOT/<n>-<name>/pm,
# one after the other, timed by /usr/bin/time; a name of greedy or ilp is passed as --scheduler,
# `default` passes none (the profile's). Run it with nothing else on the machine.
#
#   benchmarks/paper-mini/scheduler_runs.sh [ROOT] [SCHEDULER ...]
#   benchmarks/paper-mini/scheduler_runs.sh /tmp/pm greedy ilp default greedy ilp    # the page's runs 1-5
#
# EXTRA holds more snakemake options (EXTRA=-n: a dry run, to try the script). Each run's
# `wall ... user ... sys ...` line is printed and kept in ROOT/<n>-<name>/time.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=${1:-/tmp/pm}
shift || true
[ $# -gt 0 ] || set -- greedy ilp default greedy ilp
n=0
for name in "$@"; do
    n=$((n + 1))
    dir="$root/$n-$name"
    [ ! -e "$dir" ] || { echo "$dir exists: each run needs a fresh folder" >&2; exit 1; }
    mkdir -p "$dir"
    flag=()
    [ "$name" = default ] || flag=(--scheduler "$name")
    # shellcheck disable=SC2086  # EXTRA is a list of options
    /usr/bin/time -o "$dir/time.txt" -f "wall %e user %U sys %S" \
        python workflow/scripts/run_paper_mini.py --workdir "$dir/pm" -- --cores 2 --quiet rules "${flag[@]}" ${EXTRA:-} \
        > "$dir/run.log" 2>&1
    echo "run $n ($name): $(cat "$dir/time.txt")"
done
