#!/usr/bin/env python3
"""Agreement of grist's quality filters with datatrove's, per filter, on the same texts.

For each document set: `grist clean` normalizes the documents (every filter off), the non-empty
normalized texts become one JSONL input, and then each filter is evaluated alone on that same text
twice: by `grist clean` with only that filter on, and by datatrove's class with the same thresholds
(bench/python/datatrove_peer.py). Reported per filter: the fraction of documents on which
keep/reject agrees, and every disagreement classified:

  word splitting      datatrove's verdict changes to grist's when its filter splits words the way
                      grist does (grist_words below) instead of with spaCy's English tokenizer
  sentence splitting  C4's too_few_sentences on one side only (grist counts sentences by a rule,
                      datatrove by spaCy's sentencizer per line)
  line handling       the verdicts differ on a text whose lines Python's splitlines() cuts
                      differently from split('\\n')
  other               none of these: read the document (--details) and fix grist if it is a bug

    python bench/python/clean_agreement.py --grist build/grist [--corpus ../shared/corpus]
        [--set NAME=PATH ...] [--max-docs N] [--jobs 2] [--json FILE] [--details FILE]

Without --set, the sets are Wikinews, the web samples and the 20newsgroups posts of --corpus.
"""

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tarfile  # noqa: F401 - tar --zstd is used through the tar program
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import datatrove_peer  # noqa: E402


FILTERS = datatrove_peer.FILTERS

from grist_words import words as grist_words  # noqa: E402


def _filter_config(only):
    """TOML with every filter off except `only` (None: all off)."""
    parts = []
    for name in ("length",) + FILTERS:
        parts.append(f"[clean.{name}]\nenabled = {'true' if name == only else 'false'}\n")
    return "".join(parts)


def _read_parts(folder):
    """Records of the .jsonl.zst parts in `folder`, in part order."""
    out = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".jsonl.zst"):
            continue
        data = subprocess.run(["zstd", "-dcq", os.path.join(folder, name)], check=True,
                              stdout=subprocess.PIPE).stdout
        for line in data.decode("utf-8").splitlines():
            if line:
                out.append(json.loads(line))
    return out


def _aid(record):
    meta = record.get("meta") or {}
    return int(record["aid"] if "aid" in record else meta["aid"])


def run_grist(grist, inputs, work, max_docs):
    """Normalized non-empty texts of `inputs`, and per filter {doc index: 'keep' or reason}."""
    os.makedirs(work, exist_ok=True)
    cfg = os.path.join(work, "normalize.toml")
    with open(cfg, "w") as f:
        f.write(_filter_config(None))
    norm = os.path.join(work, "normalized")
    subprocess.run([grist, "clean", "--quiet", "--threads", "0", "--config", cfg, "--output", norm,
                    "--input", *inputs], check=True, stdout=subprocess.DEVNULL)
    texts = [r["text"] for r in _read_parts(norm) if r.get("text")]
    texts += [r["text"] for r in _read_parts(os.path.join(norm, "rejects"))
              if r.get("text") and "error" not in r]
    if max_docs:
        texts = texts[:max_docs]
    src = os.path.join(work, "texts.jsonl")
    with open(src, "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"text": t, "aid": i}, ensure_ascii=False) + "\n")
    verdicts = {}
    for name in FILTERS:
        cfg = os.path.join(work, f"{name}.toml")
        with open(cfg, "w") as f:
            f.write(_filter_config(name))
        out = os.path.join(work, name)
        subprocess.run([grist, "clean", "--quiet", "--threads", "0", "--config", cfg, "--output",
                        out, "--input", src], check=True, stdout=subprocess.DEVNULL)
        v = {}
        for r in _read_parts(out):
            v[_aid(r)] = "keep"
        for r in _read_parts(os.path.join(out, "rejects")):
            v[_aid(r)] = (r.get("reasons") or ["reject"])[0]
        if len(v) != len(texts):
            raise RuntimeError(f"grist clean ({name}) returned {len(v)} of {len(texts)} documents")
        verdicts[name] = v
        shutil.rmtree(out)
    return texts, verdicts


_FILTERS = None


def _init_worker():
    global _FILTERS
    _FILTERS = datatrove_peer.make_filters()
    datatrove_peer.set_word_splitter(None)


def _splitlines_differs(text):
    return len(text.splitlines()) != len(text.split("\n")) - (1 if text.endswith("\n") else 0)


def _evaluate(job):
    """datatrove's verdict per filter for one text, and the class of each disagreement."""
    i, text, grist_v = job
    out = {}
    for name in FILTERS:
        dt, _ = datatrove_peer.verdict(_FILTERS[name], text, str(i))
        g = grist_v[name]
        if (dt == "keep") == (g == "keep"):
            out[name] = (dt, None)
            continue
        cls = "other"
        if name == "c4" and "too_few_sentences" in (dt, g):
            cls = "sentence splitting"
        elif name != "c4":
            datatrove_peer.set_word_splitter(grist_words)
            try:
                swapped, _ = datatrove_peer.verdict(_FILTERS[name], text, str(i))
            finally:
                datatrove_peer.set_word_splitter(None)
            if (swapped == "keep") == (g == "keep"):
                cls = "word splitting"
        if cls == "other" and _splitlines_differs(text):
            cls = "line handling"
        out[name] = (dt, cls)
    return i, out


def agreement(texts, verdicts, jobs):
    jobs_list = [(i, t, {n: verdicts[n][i] for n in FILTERS}) for i, t in enumerate(texts)]
    results = {}
    if jobs > 1:
        with multiprocessing.get_context("fork").Pool(jobs, initializer=_init_worker) as pool:
            for i, out in pool.imap_unordered(_evaluate, jobs_list, chunksize=16):
                results[i] = out
    else:
        _init_worker()
        for job in jobs_list:
            i, out = _evaluate(job)
            results[i] = out
        datatrove_peer.restore_word_splitter()
    report = {}
    details = []
    for name in FILTERS:
        agree = 0
        classes = {}
        pairs = {}
        for i in range(len(texts)):
            dt, cls = results[i][name]
            if cls is None:
                agree += 1
                continue
            classes[cls] = classes.get(cls, 0) + 1
            key = f"grist {verdicts[name][i]} / datatrove {dt}"
            pairs[key] = pairs.get(key, 0) + 1
            details.append({"filter": name, "doc": i, "class": cls, "grist": verdicts[name][i],
                            "datatrove": dt, "text": texts[i]})
        n = len(texts)
        report[name] = {
            "docs": n, "agree": agree, "agreement": agree / n if n else 1.0,
            "grist_rejected": sum(1 for v in verdicts[name].values() if v != "keep"),
            "datatrove_rejected": sum(1 for i in range(n) if results[i][name][0] != "keep"),
            "disagreements": classes, "pairs": pairs}
    return report, details


def default_sets(corpus, tmp):
    sets = []
    if os.path.isdir(os.path.join(corpus, "wikinews-en")):
        sets.append(("wikinews-en", [os.path.join(corpus, "wikinews-en")]))
    if os.path.isdir(os.path.join(corpus, "web-samples")):
        sets.append(("web-samples", [os.path.join(corpus, "web-samples")]))
    tarball = os.path.join(corpus, "20newsgroups.tar.zst")
    if os.path.exists(tarball):
        subprocess.run(["tar", "--zstd", "-xf", tarball, "-C", tmp], check=True)
        sets.append(("20newsgroups", [os.path.join(tmp, "20newsgroups")]))
    return sets


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grist", default=os.environ.get("GRIST_BIN", "build/grist"))
    ap.add_argument("--corpus", default="../shared/corpus")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=PATH",
                    help="a document set (files or folders grist clean reads); repeatable")
    ap.add_argument("--max-docs", type=int, default=0, help="first N non-empty documents per set")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", help="write the report here")
    ap.add_argument("--details", help="write every disagreement (JSONL) here")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="grist_agreement_")
    try:
        if a.set:
            sets = []
            for s in a.set:
                name, _, path = s.partition("=")
                sets.append((name, path.split(",")))
        else:
            if not os.path.isdir(a.corpus):
                print(f"clean_agreement: no corpus at {a.corpus} (pass --corpus or --set)",
                      file=sys.stderr)
                return 2
            sets = default_sets(a.corpus, tmp)
        full = {"peer": datatrove_peer.versions(), "sets": {}}
        all_details = []
        for name, inputs in sets:
            t0 = time.time()
            texts, verdicts = run_grist(a.grist, inputs, os.path.join(tmp, name), a.max_docs)
            rep, details = agreement(texts, verdicts, a.jobs)
            full["sets"][name] = rep
            for d in details:
                d["set"] = name
            all_details += details
            if not a.quiet:
                print(f"{name}: {len(texts)} non-empty documents ({time.time() - t0:.0f} s)")
                for f in FILTERS:
                    r = rep[f]
                    cls = ", ".join(f"{k} {v}" for k, v in sorted(r["disagreements"].items()))
                    print(f"  {f:18s} {100 * r['agreement']:7.3f}% agree ({r['agree']}/{r['docs']}); "
                          f"rejected grist {r['grist_rejected']}, datatrove {r['datatrove_rejected']}"
                          + (f"; disagreements: {cls}" if cls else ""))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(full, f, indent=1, sort_keys=True)
        if a.details:
            with open(a.details, "w", encoding="utf-8") as f:
                for d in all_details:
                    f.write(json.dumps(d, ensure_ascii=False) + "\n")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
