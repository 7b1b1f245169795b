"""Pack a trained bi-encoder's passage encoder small enough to carry to a lent GPU machine, and
unpack it there as a bi-encoder directory that ``embed_shard.py`` loads (not a test).

A lent machine takes 64 MiB of files a call, and a MiniLM bi-encoder is 2 x 87 MB. Embedding
a corpus needs only the passage encoder, and of its word-embedding matrix only the rows of
the tokens the corpus holds. ``pack`` keeps those rows (and ids below 1,000: BERT's special and
``[unusedN]`` tokens, DCSR's sentence marker among them) and stores the weights in float16;
``unpack`` puts the rows back in a zero matrix of the vocabulary's size, in float32, and writes
the passage encoder as both encoders (the question encoder is not used to embed passages), with
``dcsr.json``'s digests made again and ``carried`` saying what was done. Rows never looked up do
not change a vector; the float16 rounding of the weights does, slightly (on CUDA the matrix
products run in float16 under autocast anyway):

    python benchmarks/index-compression/carry_encoder.py pack results/models/dcsr results/store/wiki .dev/encoder
    python benchmarks/index-compression/carry_encoder.py unpack .dev/encoder results/models/dcsr
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

KEEP_BELOW = 1000  # [PAD], [unusedN], [UNK], [CLS], [SEP], [MASK] in BERT's uncased vocabulary
WORDS = "embeddings.word_embeddings.weight"
WEIGHTS = "model.safetensors"


def _word_key(tensors: dict) -> str:
    keys = [k for k in tensors if k.endswith(WORDS)]
    if len(keys) != 1:
        raise SystemExit(f"expected one {WORDS} tensor, found {keys}")
    return keys[0]


def used_token_ids(model_dir: Path, store: Path, batch: int = 4096) -> np.ndarray:
    from dcsr.models.biencoder import load_tokenizer
    from dcsr.retrieval.embed import shard_passages

    tok = load_tokenizer(str(model_dir / "passage_encoder"))
    used = set(range(KEEP_BELOW))
    _, titles, texts = shard_passages(store, 0, 1)
    strings = titles + texts
    for i in range(0, len(strings), batch):
        for ids in tok(strings[i:i + batch], add_special_tokens=False)["input_ids"]:
            used.update(ids)
    return np.array(sorted(used), dtype=np.int64)


def pack(model_dir: Path, store: Path, out: Path) -> None:
    from safetensors.numpy import load_file, save_file

    out.mkdir(parents=True, exist_ok=True)
    enc = model_dir / "passage_encoder"
    tensors = load_file(str(enc / WEIGHTS))
    key = _word_key(tensors)
    keep = used_token_ids(model_dir, store)
    tensors[key] = tensors[key][keep]
    save_file({k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in tensors.items()},
              str(out / WEIGHTS))
    np.save(out / "kept_ids.npy", keep)
    for f in enc.iterdir():
        if f.name != WEIGHTS:
            shutil.copy(f, out / f.name)
    shutil.copy(model_dir / "dcsr.json", out / "dcsr.json")
    print(f"kept {len(keep):,} of the vocabulary's rows; {(out / WEIGHTS).stat().st_size / 1e6:.1f} MB")


def unpack(packed: Path, model_dir: Path) -> None:
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(packed / WEIGHTS))
    key = _word_key(tensors)
    keep = np.load(packed / "kept_ids.npy")
    vocab = json.loads((packed / "config.json").read_text())["vocab_size"]
    words = np.zeros((vocab, tensors[key].shape[1]), dtype=np.float32)
    words[keep] = tensors[key]
    tensors = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in tensors.items()}
    tensors[key] = words
    meta = json.loads((packed / "dcsr.json").read_text())
    digests = {}
    for sub in ("question_encoder", "passage_encoder"):
        d = model_dir / sub
        d.mkdir(parents=True, exist_ok=True)
        for f in packed.iterdir():
            if f.name not in (WEIGHTS, "kept_ids.npy", "dcsr.json"):
                shutil.copy(f, d / f.name)
        save_file(tensors, str(d / WEIGHTS))
        digests[f"{sub}/{WEIGHTS}"] = hashlib.sha256((d / WEIGHTS).read_bytes()).hexdigest()
    meta["weights_sha256"] = digests
    meta["carried"] = ("benchmarks/index-compression/carry_encoder.py: the passage encoder only (as both "
                       f"encoders), weights rounded to float16, {len(keep):,} word-embedding rows kept")
    (model_dir / "dcsr.json").write_text(json.dumps(meta, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("model_dir", type=Path)
    p.add_argument("store", type=Path, help="the corpus's passage store (its tokens are the rows kept)")
    p.add_argument("out", type=Path)
    u = sub.add_parser("unpack")
    u.add_argument("packed", type=Path)
    u.add_argument("model_dir", type=Path)
    a = ap.parse_args()
    if a.cmd == "pack":
        pack(a.model_dir, a.store, a.out)
    else:
        unpack(a.packed, a.model_dir)


if __name__ == "__main__":
    main()
