#!/usr/bin/env bash
# Kill one pipeline job halfway, as the rehearsal's fault test did (benchmarks/rehearsal/rehearsal.md,
# "Faults at scale"): wait for the Python process whose command line matches PATTERN (an extended
# regular expression, pgrep -f), let it run DELAY seconds, then kill -9 that one process (by its id)
# and print the time and the command line. Start it beside the Snakemake run:
#
#   benchmarks/rehearsal/kill_job.sh PATTERN DELAY
#   benchmarks/rehearsal/kill_job.sh '^python [^ ]*/embed_shard\.py .*--shard 6 ' 40    # the 1M run's embedding
#   benchmarks/rehearsal/kill_job.sh '^python [^ ]*/search_shard\.py --index [^ ]*/dcsr/shard-5\.faiss' 4
#
# A pattern should match one job only (its script and its shard; `^python [^ ]*/` leaves out the
# `bash -c` around the job, whose command line holds the same words); the oldest match is killed.
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
pattern=$1 delay=$2
until pid=$(pgrep -o -f -- "$pattern"); do sleep 0.5; done
echo "$(date -u +%H:%M:%S) found $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline")"
sleep "$delay"
if kill -9 "$pid" 2>/dev/null; then
    echo "$(date -u +%H:%M:%S) killed $pid after ${delay} s"
else
    echo "$(date -u +%H:%M:%S) $pid ended before ${delay} s: nothing killed" >&2
    exit 1
fi
