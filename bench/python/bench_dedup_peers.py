#!/usr/bin/env python3
"""The dedup benchmark's peers on the documents of a JSONL file, one process, one thread:

  datasketch  MinHash(num_perm).update_batch over each document's shingles, then MinHashLSH with the
              same bands x rows as grist (insert every document, query every document)
  rensa       RMinHash(num_perm).update, then RMinHashLSH(threshold, num_perm, num_bands)
  datatrove   its MinHash dedup stages (MinhashDedupSignature, MinhashDedupBuckets,
              MinhashDedupCluster, MinhashDedupFilter) on a LocalPipelineExecutor, 1 task 1 worker,
              with the same n-grams and bands x rows (its own shingling: spaCy words)

Shingles for datasketch and rensa are grist's (dedup/minhash.h): ASCII letters lower-cased, ASCII
punctuation, whitespace and control bytes separate words, bytes >= 0x80 and digits are word bytes,
word 5-grams joined by one space (fewer than 5 words: one shingle of them all). The truth is the
exact Jaccard of those shingle sets: every pair at or above --threshold. Each tool's reported pairs
(LSH candidate pairs; for datatrove every pair inside one of its clusters; for grist, the pairs in
--grist-pairs, one "i j" per line) are scored against it as precision and recall.

Rates are MB of document text per second of this process's CPU time (per core), one sample per
measured repetition. Prints one JSON object.

    python bench/python/bench_dedup_peers.py DOCS.jsonl [--grist-pairs FILE] [--repetitions 2]
"""

import argparse
import itertools
import json
import os
import re
import resource
import shutil
import sys
import tempfile
from collections import defaultdict

WORD = re.compile(rb"[0-9a-z\x80-\xff]+")


def cpu():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def shingles(text, n):
    words = WORD.findall(text.encode("utf-8", "surrogatepass").lower())
    if not words:
        return set()
    if len(words) < n:
        return {b" ".join(words)}
    return {b" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


def truth_pairs(sets, threshold):
    """Every pair of documents whose shingle sets have Jaccard >= threshold (exact)."""
    index = defaultdict(list)
    for d, s in enumerate(sets):
        for x in s:
            index[x].append(d)
    # A pair at Jaccard >= t shares at least t * max(|A|, |B|) shingles: count shared shingles over
    # the posting lists (a shingle in very many documents is counted through the exact check).
    shared = defaultdict(int)
    for docs in index.values():
        if len(docs) < 2 or len(docs) > 2000:
            continue
        for a, b in itertools.combinations(docs, 2):
            shared[(a, b)] += 1
    out = set()
    for (a, b), k in shared.items():
        la, lb = len(sets[a]), len(sets[b])
        if k < threshold * max(la, lb):
            continue
        j = k / (la + lb - k)
        if j >= threshold:
            out.add((a, b))
    return out


def score(reported, truth):
    tp = len(reported & truth)
    return {"reported": len(reported), "true_positives": tp,
            "precision": tp / len(reported) if reported else 1.0,
            "recall": tp / len(truth) if truth else 1.0}


def run_datasketch(texts, sets, a, nbytes):
    from datasketch import MinHash, MinHashLSH
    import datasketch
    sig, whole = [], []
    pairs = set()
    for rep in range(a.warmup + a.repetitions):
        t0 = cpu()
        mhs = []
        for t in texts:
            m = MinHash(num_perm=a.num_perm)
            m.update_batch(list(shingles(t, a.ngram)))
            mhs.append(m)
        t1 = cpu()
        lsh = MinHashLSH(num_perm=a.num_perm, params=(a.bands, a.rows))
        for i, m in enumerate(mhs):
            if sets[i]:
                lsh.insert(i, m)
        pairs = set()
        for i, m in enumerate(mhs):
            if sets[i]:
                for j in lsh.query(m):
                    if j != i:
                        pairs.add((min(i, j), max(i, j)))
        t2 = cpu()
        if rep >= a.warmup:
            sig.append(nbytes / 1e6 / max(t1 - t0, 1e-9))
            whole.append(nbytes / 1e6 / max(t2 - t0, 1e-9))
    return {"version": datasketch.__version__, "sig_mb_per_s": sig, "whole_mb_per_s": whole}, pairs


def run_rensa(texts, sets, a, nbytes):
    from rensa import RMinHash, RMinHashLSH
    from importlib.metadata import version
    sig, whole = [], []
    pairs = set()
    for rep in range(a.warmup + a.repetitions):
        t0 = cpu()
        mhs = []
        for t in texts:
            m = RMinHash(num_perm=a.num_perm, seed=42)
            m.update([x.decode("utf-8", "surrogateescape") for x in shingles(t, a.ngram)])
            mhs.append(m)
        t1 = cpu()
        lsh = RMinHashLSH(threshold=a.threshold, num_perm=a.num_perm, num_bands=a.bands)
        for i, m in enumerate(mhs):
            if sets[i]:
                lsh.insert(i, m)
        pairs = set()
        for i, m in enumerate(mhs):
            if sets[i]:
                for j in lsh.query(m):
                    if j != i:
                        pairs.add((min(i, j), max(i, j)))
        t2 = cpu()
        if rep >= a.warmup:
            sig.append(nbytes / 1e6 / max(t1 - t0, 1e-9))
            whole.append(nbytes / 1e6 / max(t2 - t0, 1e-9))
    return {"version": version("rensa"), "sig_mb_per_s": sig, "whole_mb_per_s": whole}, pairs


def run_datatrove(path, a, nbytes):
    import logging
    from importlib.metadata import version
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (MinhashDedupBuckets, MinhashDedupCluster,
                                          MinhashDedupFilter, MinhashDedupSignature)
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter
    try:
        from loguru import logger
        logger.remove()
        logger.add(sys.stderr, level="ERROR")
    except Exception:  # noqa: BLE001 - quieting the logs is best effort
        pass
    logging.disable(logging.WARNING)
    from datatrove.utils.hashing import HashConfig
    # datatrove's default xxhash path hands str to xxhash, which xxhash >= 4 refuses; its sha1 path
    # encodes first (64-bit hashes either way).
    cfg = MinhashConfig(n_grams=a.ngram, num_buckets=a.bands, hashes_per_bucket=a.rows,
                        hash_config=HashConfig(precision=64, hash_fc="sha1"))
    whole = []
    pairs = set()
    data = os.path.dirname(os.path.abspath(path))
    name = os.path.basename(path)
    for rep in range(a.warmup + a.repetitions):
        work = tempfile.mkdtemp(prefix="grist_dt_minhash_")
        try:
            def ex(steps, tag):
                LocalPipelineExecutor(pipeline=steps, tasks=1, workers=1,
                                      logging_dir=os.path.join(work, "logs", tag)).run()
            t0 = cpu()
            ex([JsonlReader(data, glob_pattern=name),
                MinhashDedupSignature(output_folder=os.path.join(work, "sig"), config=cfg)], "sig")
            LocalPipelineExecutor(
                pipeline=[MinhashDedupBuckets(input_folder=os.path.join(work, "sig"),
                                              output_folder=os.path.join(work, "buckets"),
                                              config=cfg)],
                tasks=a.bands, workers=1, logging_dir=os.path.join(work, "logs", "b")).run()
            ex([MinhashDedupCluster(input_folder=os.path.join(work, "buckets"),
                                    output_folder=os.path.join(work, "remove"), config=cfg,
                                    save_cluster_id=True)], "c")
            ex([JsonlReader(data, glob_pattern=name),
                MinhashDedupFilter(input_folder=os.path.join(work, "remove")),
                JsonlWriter(os.path.join(work, "out"))], "f")
            t1 = cpu()
            if rep >= a.warmup:
                whole.append(nbytes / 1e6 / max(t1 - t0, 1e-9))
            # every pair inside a cluster (doc index = line index of the one input file)
            import struct
            clusters = defaultdict(list)
            cpath = os.path.join(work, "remove", "000000.clusters")
            if os.path.exists(cpath):
                with open(cpath, "rb") as f:
                    raw = f.read()
                for doc, cid in struct.iter_unpack("<2I", raw):
                    clusters[cid].append(doc)
            pairs = set()
            for docs in clusters.values():
                for x, y in itertools.combinations(sorted(set(docs)), 2):
                    pairs.add((x, y))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return {"version": version("datatrove"), "whole_mb_per_s": whole}, pairs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("docs")
    ap.add_argument("--grist-pairs")
    ap.add_argument("--repetitions", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--num-perm", type=int, default=112)
    ap.add_argument("--bands", type=int, default=14)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--ngram", type=int, default=5)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--peers", default="datasketch,rensa,datatrove")
    a = ap.parse_args()
    with open(a.docs, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    sets = [shingles(t, a.ngram) for t in texts]
    truth = truth_pairs(sets, a.threshold)
    out = {"docs": len(texts), "bytes": nbytes, "truth_pairs": len(truth)}
    for name in a.peers.split(","):
        try:
            if name == "datasketch":
                r, pairs = run_datasketch(texts, sets, a, nbytes)
            elif name == "rensa":
                r, pairs = run_rensa(texts, sets, a, nbytes)
            elif name == "datatrove":
                r, pairs = run_datatrove(a.docs, a, nbytes)
            else:
                continue
            r.update(score(pairs, truth))
            out[name] = r
        except Exception as e:  # noqa: BLE001 - a failing peer is reported, the others go on
            out[name] = {"error": f"{type(e).__name__}: {e}"}
    if a.grist_pairs:
        pairs = set()
        with open(a.grist_pairs) as f:
            for line in f:
                if line.strip():
                    x, y = map(int, line.split())
                    pairs.add((min(x, y), max(x, y)))
        out["grist"] = score(pairs, truth)
    flat = {}
    for k, v in out.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                flat[f"{k}_{k2}"] = v2
        else:
            flat[k] = v
    print(json.dumps(flat))


if __name__ == "__main__":
    main()
