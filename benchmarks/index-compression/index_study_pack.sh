#!/usr/bin/env bash
# Pack what benchmarks/index-compression/index_study_remote.sh needs, from a results folder in which Snakemake has
# made everything before embed_shard (--omit-from embed_shard):
#   benchmarks/index-compression/index_study_pack.sh CONFIG RESULTS CORPUS MODEL DATASET VARIANTS STUDY [OVERLAY...]
# VARIANTS: a file of NAME|FACTORY|SEARCH_PARAMS|REUSE lines (index_study_remote.sh), Flat first.
set -euo pipefail
config=$1 results=$2 corpus=$3 model=$4 dataset=$5 variants=$6 study=$7
shift 7
rm -rf "$study"
mkdir -p "$study/jobs"
cp "$variants" "$study/variants.txt"
printf 'RESULTS=%q\nCORPUS=%q\nMODEL=%q\nDATASET=%q\nTIMED=%q\n' "$results" "$corpus" "$model" "$dataset" "${TIMED:-0}" > "$study/study.env"
target=metrics/$corpus/$model/$model/$dataset.questions.jsonl
while IFS='|' read -r name factory params reuse; do
  [ -n "$name" ] || continue
  dst=$results-$name rules=index_shard,search_shard,choose_temperature,merge_runs
  [ "$name" = Flat ] && dst=$results rules=embed_shard,index_shard,search_shard,choose_temperature,merge_runs
  [ -n "$reuse" ] && rules=search_shard,choose_temperature,merge_runs
  overlay=$(mktemp --suffix .yaml)
  printf 'results: %s\nindex:\n  factory: "%s"\n  search_params: "%s"\n' "$dst" "$factory" "$params" > "$overlay"
  snakemake -n -p --cores 2 --profile profiles/local --configfile "$config" "$@" "$overlay" -- "$dst/$target" > "$study/dry.txt"
  python benchmarks/index-compression/replay_jobs.py parse "$study/dry.txt" --rules "$rules" --root "$PWD" > "$study/jobs/$name.json"
  rm -f "$overlay" "$study/dry.txt"
done < "$variants"
python benchmarks/index-compression/carry_encoder.py pack "$results/models/$model" "$results/store/$corpus" "$study/encoder"
# the files the Flat jobs read that no replayed job writes, but the model (carried as encoder/)
python -c '
import json, sys
jobs = json.load(open(sys.argv[1]))
made = {o for j in jobs for o in j["output"]}
print("\n".join(sorted({i for j in jobs for i in j["input"]
                        if i != sys.argv[2] and not any(i == o or i.startswith(o + "/") for o in made)})))
' "$study/jobs/Flat.json" "$results/models/$model" > "$study/inputs.txt"
tar -cJf "$study/results.tar.xz" -T "$study/inputs.txt"
du -sh "$study"/*
