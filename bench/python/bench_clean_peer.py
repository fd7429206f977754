#!/usr/bin/env python3
"""The clean benchmark's peer: datatrove's FineWeb filter pipeline (GopherRepetitionFilter,
GopherQualityFilter, C4QualityFilter, FineWebQualityFilter, grist's thresholds; see
datatrove_peer.py) over the documents of a JSONL file, one process, one thread.

Each document goes through the filters in FineWeb's order until one rejects it (C4's edited text goes
on to FineWeb), as datatrove's pipeline runs them; the filters' `filter()` is called directly, so
datatrove's pipeline bookkeeping is not counted (in its favour). Prints one JSON object:
{"mb_per_s": [...], "docs_per_s": [...], "kept": N, "docs": N, "bytes": N, "versions": {...}},
one sample per measured repetition, rates per second of this process's CPU time (per core).

    python bench/python/bench_clean_peer.py DOCS.jsonl [--repetitions 3] [--warmup 1]
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import datatrove_peer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("docs")
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    a = ap.parse_args()
    with open(a.docs, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    filters = datatrove_peer.make_filters()
    datatrove_peer.pipeline(filters, "Warm the tokenizer up. It loads spaCy on first use.")
    mb, dps = [], []
    kept = 0
    for rep in range(a.warmup + a.repetitions):
        kept = 0
        t0 = time.process_time()
        for i, t in enumerate(texts):
            kept += datatrove_peer.pipeline(filters, t, str(i)) == "keep"
        dt = max(time.process_time() - t0, 1e-9)
        if rep >= a.warmup:
            mb.append(nbytes / 1e6 / dt)
            dps.append(len(texts) / dt)
    print(json.dumps({"mb_per_s": mb, "docs_per_s": dps, "kept": kept, "docs": len(texts),
                      "bytes": nbytes, "versions": datatrove_peer.versions()}))


if __name__ == "__main__":
    main()
