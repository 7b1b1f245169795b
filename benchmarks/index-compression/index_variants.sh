#!/usr/bin/env bash
# Rebuild one results folder's index for one passage encoder with another FAISS factory, over a
# hard-linked copy (benchmarks/index-compression/index-compression.md), then search, merge and score it again:
#   benchmarks/index-compression/index_variants.sh CONFIG SOURCE_RESULTS NAME FACTORY SEARCH_PARAMS CORPUS MODEL TARGET...
# makes SOURCE_RESULTS-NAME (benchmarks/index-compression/variant_copy.sh); TARGETs are paths relative to it (the
# metrics to rebuild). KEEP_INDEX=1 keeps the source's index (only SEARCH_PARAMS differ: a
# search-effort sweep).
set -euo pipefail
config=$1 src=$2 name=$3 factory=$4 params=$5 corpus=$6 model=$7
shift 7
dst="$src-$name"
# everything downstream of the index of $model on $corpus: it is made again with $factory
"$(dirname "$0")/variant_copy.sh" "$src" "$dst" "$corpus" "$model"
overlay=$(mktemp --suffix .yaml)
printf 'results: %s\nindex:\n  factory: "%s"\n  search_params: "%s"\n' "$dst" "$factory" "$params" > "$overlay"
snakemake --cores 2 --profile profiles/local --rerun-triggers mtime --configfile "$config" "$overlay" \
    -- $(for t in "$@"; do printf '%s/%s ' "$dst" "$t"; done)
rm -f "$overlay"
