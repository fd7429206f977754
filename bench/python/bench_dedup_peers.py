#!/usr/bin/env python3
"""The dedup benchmark's peers on the documents of a JSONL file, one process, one thread:

  datasketch  MinHash(num_perm).update_batch over each document's shingles, then MinHashLSH with the
              same bands x rows as grist (insert every document, query every document)
  rensa       RMinHash(num_perm).update, then RMinHashLSH(threshold, num_perm, num_bands)
  datatrove   its MinHash dedup stages (MinhashDedupSignature, MinhashDedupBuckets,
              MinhashDedupCluster, MinhashDedupFilter) on a LocalPipelineExecutor, 1 task 1 worker,
              with the same n-grams and bands x rows (its own shingling: spaCy words)

Each peer runs on a prefix of the documents: the first --max-mb-<peer> MB of text (0: all of them),
since datasketch and datatrove are too slow for the sample grist is timed on. The prefix each peer
ran on is in the output (<peer>_docs, <peer>_bytes).

Shingles for datasketch and rensa are grist's (dedup/minhash.h): ASCII letters lower-cased, ASCII
punctuation, whitespace and control bytes separate words, bytes >= 0x80 and digits are word bytes,
word 5-grams joined by one space (fewer than 5 words: one shingle of them all). The truth is the
exact Jaccard of those shingle sets: every pair at or above --threshold among the peer's documents.
Each tool's reported pairs (LSH candidate pairs; for datatrove every pair inside one of its clusters)
are scored against it as precision and recall, and grist's pairs (--grist-pairs, one "i j" per line,
document indices of the whole file) restricted to the same prefix are scored against the same truth
(<peer>_grist_precision, ...): the pairs of a prefix are exactly the pairs grist finds on it, as
banding and verification are decided pair by pair.

Rates are MB of document text per second of this process's CPU time (per core), one sample per
measured repetition. Prints one JSON object.

    python bench/python/bench_dedup_peers.py DOCS.jsonl [--grist-pairs FILE] [--repetitions 3]
"""

import argparse
import itertools
import json
import os
import re
import resource
import shutil
import struct
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


def rate(nbytes, seconds):
    return nbytes / 1e6 / max(seconds, 1e-9)


def run_lsh_peer(new_minhash, update, new_lsh, texts, sets, a, nbytes):
    """The loop datasketch and rensa share: per document a MinHash of its shingles (timed as
    signatures), then an LSH index: insert every document with shingles, query every one (timed
    with the signatures as the whole dedup). Returns the rates and the last run's pairs."""
    sig, whole = [], []
    pairs = set()
    for rep in range(a.warmup + a.repetitions):
        t0 = cpu()
        mhs = []
        for t in texts:
            m = new_minhash()
            update(m, shingles(t, a.ngram))
            mhs.append(m)
        t1 = cpu()
        lsh = new_lsh()
        live = [i for i in range(len(mhs)) if sets[i]]
        for i in live:
            lsh.insert(i, mhs[i])
        pairs = set()
        for i in live:
            for j in lsh.query(mhs[i]):
                if j != i:
                    pairs.add((min(i, j), max(i, j)))
        t2 = cpu()
        if rep >= a.warmup:
            sig.append(rate(nbytes, t1 - t0))
            whole.append(rate(nbytes, t2 - t0))
    return {"sig_mb_per_s": sig, "whole_mb_per_s": whole}, pairs


def run_datasketch(texts, sets, a, nbytes):
    import datasketch
    from datasketch import MinHash, MinHashLSH

    r, pairs = run_lsh_peer(lambda: MinHash(num_perm=a.num_perm),
                            lambda m, sh: m.update_batch(list(sh)),
                            lambda: MinHashLSH(num_perm=a.num_perm, params=(a.bands, a.rows)),
                            texts, sets, a, nbytes)
    r["version"] = datasketch.__version__
    return r, pairs


def run_rensa(texts, sets, a, nbytes):
    from importlib.metadata import version
    from rensa import RMinHash, RMinHashLSH
    r, pairs = run_lsh_peer(
        lambda: RMinHash(num_perm=a.num_perm, seed=42),
        lambda m, sh: m.update([x.decode("utf-8", "surrogateescape") for x in sh]),
        lambda: RMinHashLSH(threshold=a.threshold, num_perm=a.num_perm, num_bands=a.bands),
        texts, sets, a, nbytes)
    r["version"] = version("rensa")
    return r, pairs


def run_datatrove(texts, a, nbytes):
    import logging
    from importlib.metadata import version
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (MinhashDedupBuckets, MinhashDedupCluster,
                                          MinhashDedupFilter, MinhashDedupSignature)
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter
    from datatrove.utils.hashing import HashConfig
    try:
        from loguru import logger
        logger.remove()
        logger.add(sys.stderr, level="ERROR")
    except Exception:  # noqa: BLE001 - quieting the logs is best effort
        pass
    logging.disable(logging.WARNING)
    # datatrove's default xxhash path hands str to xxhash, which xxhash >= 4 refuses; its sha1 path
    # encodes first (64-bit hashes either way).
    cfg = MinhashConfig(n_grams=a.ngram, num_buckets=a.bands, hashes_per_bucket=a.rows,
                        hash_config=HashConfig(precision=64, hash_fc="sha1"))
    whole = []
    pairs = set()
    data = tempfile.mkdtemp(prefix="grist_dt_input_")
    name = "docs.jsonl"
    with open(os.path.join(data, name), "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    try:
        for rep in range(a.warmup + a.repetitions):
            work = tempfile.mkdtemp(prefix="grist_dt_minhash_")
            try:
                def ex(steps, tag, tasks=1):
                    LocalPipelineExecutor(pipeline=steps, tasks=tasks, workers=1,
                                          logging_dir=os.path.join(work, "logs", tag)).run()

                def sub(x):
                    return os.path.join(work, x)
                t0 = cpu()
                ex([JsonlReader(data, glob_pattern=name),
                    MinhashDedupSignature(output_folder=sub("sig"), config=cfg)], "s")
                ex([MinhashDedupBuckets(input_folder=sub("sig"), output_folder=sub("buckets"),
                                        config=cfg)], "b", tasks=a.bands)
                ex([MinhashDedupCluster(input_folder=sub("buckets"), output_folder=sub("remove"),
                                        config=cfg, save_cluster_id=True)], "c")
                ex([JsonlReader(data, glob_pattern=name),
                    MinhashDedupFilter(input_folder=sub("remove")), JsonlWriter(sub("out"))], "f")
                t1 = cpu()
                if rep >= a.warmup:
                    whole.append(rate(nbytes, t1 - t0))
                # every pair inside a cluster (doc index = line index of the one input file)
                clusters = defaultdict(list)
                cpath = os.path.join(work, "remove", "000000.clusters")
                if os.path.exists(cpath):
                    with open(cpath, "rb") as f:
                        for doc, cid in struct.iter_unpack("<2I", f.read()):
                            clusters[cid].append(doc)
                pairs = set()
                for docs in clusters.values():
                    pairs.update(itertools.combinations(sorted(set(docs)), 2))
            finally:
                shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    return {"version": version("datatrove"), "whole_mb_per_s": whole}, pairs


def prefix(texts, max_mb):
    """How many of the first documents make up max_mb MB of text (all of them for 0)."""
    if max_mb <= 0:
        return len(texts)
    total, n = 0, 0
    while n < len(texts) and total < max_mb * 1e6:
        total += len(texts[n].encode("utf-8", "surrogatepass"))
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("docs")
    ap.add_argument("--grist-pairs")
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--num-perm", type=int, default=112)
    ap.add_argument("--bands", type=int, default=14)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--ngram", type=int, default=5)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--peers", default="datasketch,rensa,datatrove")
    ap.add_argument("--no-scores", action="store_true",
                    help="rates only: no exact pairs, precision or recall (the interleaved runs)")
    for peer in ("datasketch", "rensa", "datatrove"):
        ap.add_argument(f"--max-mb-{peer}", type=float, default=0,
                        help=f"run {peer} on the first MB of text only (0: every document)")
    a = ap.parse_args()
    with open(a.docs, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    sizes = [len(t.encode("utf-8", "surrogatepass")) for t in texts]
    all_sets = [shingles(t, a.ngram) for t in texts]
    grist = set()
    if a.grist_pairs:
        with open(a.grist_pairs) as f:
            for line in f:
                if line.strip():
                    x, y = map(int, line.split())
                    grist.add((min(x, y), max(x, y)))
    out = {"docs": len(texts), "bytes": sum(sizes)}
    truths = {}  # prefix length -> truth pairs of that prefix
    for name in a.peers.split(","):
        if name not in ("datasketch", "rensa", "datatrove"):
            continue
        n = prefix(texts, getattr(a, f"max_mb_{name}"))
        nbytes = sum(sizes[:n])
        sets = all_sets[:n]
        if n not in truths and not a.no_scores:
            truths[n] = truth_pairs(sets, a.threshold)
        truth = truths.get(n, set())
        r = {"docs": n, "bytes": nbytes}
        if not a.no_scores:
            r["truth_pairs"] = len(truth)
        try:
            if name == "datasketch":
                rates, pairs = run_datasketch(texts[:n], sets, a, nbytes)
            elif name == "rensa":
                rates, pairs = run_rensa(texts[:n], sets, a, nbytes)
            else:
                rates, pairs = run_datatrove(texts[:n], a, nbytes)
            r.update(rates)
            if not a.no_scores:
                r.update(score(pairs, truth))
        except Exception as e:  # noqa: BLE001 - a failing peer is reported, the others go on
            r["error"] = f"{type(e).__name__}: {e}"
        if a.grist_pairs and not a.no_scores:
            mine = {p for p in grist if p[1] < n}
            r.update({f"grist_{k}": v for k, v in score(mine, truth).items()})
        out[name] = r
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
