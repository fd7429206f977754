#!/usr/bin/env python3
"""Tokenize peers for `grist bench tokenize` (bench_tokenize.cc calls this script; grist's own engine
and the SentencePiece-module peer are measured there):

  hf-tokenizers  HF `tokenizers` with the same SentencePiece BPE model converted (vocab, merges
                 ordered by the merged piece's score, byte fallback, "▁" for spaces and a dummy
                 prefix: what transformers' LlamaConverter builds). Its ids are compared with
                 SentencePiece's on every document first: only an identical tokenizer is a peer,
                 so throughput is measured only when every document matches.
  megatron       Megatron-LM's preprocessing path, text to .bin/.idx: megatron-core's
                 IndexedDatasetBuilder fed by the SentencePiece model, one document at a time
                 (preprocess_data.py lives in the Megatron-LM repository, not in megatron-core, so
                 this is its documented equivalent: tokenize, add_item, end_document, finalize).

Input: a file with one document per line (newlines inside documents escaped as the caller wants).
Rates are MB of text per second: per core (this process's CPU time) and, for hf-tokenizers'
encode_batch on --threads threads, wall-clock. Prints one JSON object (flat keys).

    python bench/python/bench_tokenize_peers.py MODEL TEXT [--threads N] [--repetitions 2]
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import time


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def hf_from_spm(model_path):
    """tokenizers.Tokenizer equivalent to a SentencePiece BPE model (byte fallback)."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    from tokenizers import Tokenizer, decoders, normalizers
    from tokenizers.models import BPE
    m = pb.ModelProto()
    with open(model_path, "rb") as f:
        m.ParseFromString(f.read())
    if m.trainer_spec.model_type != 2:  # BPE
        raise ValueError("not a BPE model")
    vocab = {p.piece: i for i, p in enumerate(m.pieces)}
    scores = {p.piece: p.score for p in m.pieces}
    merges = []
    for piece, pid in vocab.items():
        for k in range(1, len(piece)):
            a, b = piece[:k], piece[k:]
            if a in vocab and b in vocab:
                merges.append((scores[piece], pid, a, b))
    merges.sort(key=lambda x: (-x[0], x[1]))
    unk = m.trainer_spec.unk_id
    bpe = BPE(vocab=vocab, merges=[(a, b) for _, _, a, b in merges],
              unk_token=m.pieces[unk].piece, fuse_unk=True, byte_fallback=True)
    tok = Tokenizer(bpe)
    norm = [normalizers.Replace(" ", "\u2581")]
    if m.normalizer_spec.add_dummy_prefix:
        norm.insert(0, normalizers.Prepend("\u2581"))
    tok.normalizer = normalizers.Sequence(norm)
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse()])
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("text")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repetitions", type=int, default=2)
    ap.add_argument("--peers", default="hf-tokenizers,megatron")
    a = ap.parse_args()
    with open(a.text, encoding="utf-8") as f:
        docs = [line.rstrip("\n") for line in f]
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=a.model)
    out = {"docs": len(docs), "bytes": nbytes}
    reference = [sp.encode(d) for d in docs]
    if "hf-tokenizers" in a.peers:
        try:
            import tokenizers
            out["hf_version"] = tokenizers.__version__
            tok = hf_from_spm(a.model)
            got = [e.ids for e in tok.encode_batch(docs, add_special_tokens=False)]
            same = sum(x == y for x, y in zip(got, reference))
            out["hf_identical_docs"] = same
            out["hf_identical"] = same == len(docs)
            if same == len(docs):
                per_core, wall = [], []
                for _ in range(a.repetitions):
                    t0 = cpu()
                    for d in docs:
                        tok.encode(d, add_special_tokens=False)
                    per_core.append(nbytes / 1e6 / max(cpu() - t0, 1e-9))
                os.environ["RAYON_NUM_THREADS"] = str(a.threads)
                for _ in range(a.repetitions):
                    t0 = time.perf_counter()
                    tok.encode_batch(docs, add_special_tokens=False)
                    wall.append(nbytes / 1e6 / (time.perf_counter() - t0))
                out["hf_per_core_mb_per_s"] = per_core
                out["hf_batch_mb_per_s"] = wall
            else:
                bad = next(i for i, (x, y) in enumerate(zip(got, reference)) if x != y)
                out["hf_error"] = (f"not identical to SentencePiece on {len(docs) - same} of "
                                   f"{len(docs)} documents (first: document {bad}): not a peer")
        except Exception as e:  # noqa: BLE001 - a failing peer is reported, the others go on
            out["hf_error"] = f"{type(e).__name__}: {e}"
    if "megatron" in a.peers:
        try:
            import warnings
            warnings.filterwarnings("ignore")
            import numpy as np
            import torch
            from importlib.metadata import version
            from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
            out["megatron_version"] = version("megatron-core")
            rates = []
            with tempfile.TemporaryDirectory() as tmp:
                for _ in range(a.repetitions):
                    prefix = os.path.join(tmp, "text_document")
                    t0 = cpu()
                    b = IndexedDatasetBuilder(prefix + ".bin", dtype=np.int32)
                    for d in docs:
                        ids = sp.encode(d)
                        b.add_item(torch.IntTensor(ids))
                        b.end_document()
                    b.finalize(prefix + ".idx")
                    rates.append(nbytes / 1e6 / max(cpu() - t0, 1e-9))
            out["megatron_per_core_mb_per_s"] = rates
        except Exception as e:  # noqa: BLE001
            out["megatron_error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
