"""Helpers of the Python tests that run the `grist` command: a deterministic synthetic corpus (no
third-party data needed) and a small release built from it.

The corpus is pseudo-English: a few dozen English function words (so grist clean's stop-word filter
passes) mixed with seeded pseudo-words (so a small SentencePiece vocabulary trains), in sentences and
paragraphs of varied length.
"""

import json
import os
import random
import shutil
import subprocess
import sys

_STOP = ("the be to of and that have with a in is it for on as at by this from or an are was but "
         "not they we you he she his her their one all would there what so up out if about who "
         "which when make can like time no just him know take people into year your good some "
         "could them see other than then now look only come its over think also back after use two "
         "how our work first well way even new want because any these give day most us").split()


def grist_binary():
    """The grist command under test: $GRIST_BUILD_DIR/grist, else `grist` on PATH."""
    build = os.environ.get("GRIST_BUILD_DIR")
    if build and os.path.exists(os.path.join(build, "grist")):
        return os.path.join(build, "grist")
    found = shutil.which("grist")
    if found is None:
        raise RuntimeError("no grist binary: set GRIST_BUILD_DIR to the build folder")
    return found


def torchrun(nproc):
    """The command that starts `nproc` local ranks (torchrun --standalone) with its workers meeting
    at 127.0.0.1 (--local-addr): without it torchrun gives them the host's name, and where that name
    does not resolve (a chroot or container whose /etc/hosts lacks it) the ranks never meet."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--local-addr",
            "127.0.0.1", "--nproc-per-node", str(nproc)]


def run_grist(*args, check=True, **kw):
    """Runs grist with args; returns the CompletedProcess (text mode)."""
    p = subprocess.run([grist_binary(), *map(str, args)], capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"grist {' '.join(map(str, args))} failed ({p.returncode}):\n"
                             f"{p.stdout}\n{p.stderr}")
    return p


def synthetic_documents(n, seed=7):
    """n documents {"id", "text"} of 60 to ~900 words, deterministic for a seed."""
    rng = random.Random(seed)
    syll = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    pseudo = sorted({"".join(rng.choice(syll) for _ in range(rng.randint(1, 3)))
                     for _ in range(400)})
    docs = []
    for i in range(n):
        paras = []
        for _ in range(rng.randint(2, 6)):
            sents = []
            for _ in range(rng.randint(2, 8)):
                words = [rng.choice(_STOP) if rng.random() < 0.45 else rng.choice(pseudo)
                         for _ in range(rng.randint(6, 18))]
                sents.append(" ".join(words).capitalize() + ".")
            paras.append(" ".join(sents))
        docs.append({"id": f"doc-{i:05d}", "text": "\n\n".join(paras)})
    return docs


def write_jsonl(path, docs):
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, sort_keys=True) + "\n")


def release_config(inputs, seq_len=64, vocab_size=400, validation_fraction=0.2,
                   shard_max_bytes=4096, clean=False, dedup=False, seed=11):
    paths = ", ".join(json.dumps(p) for p in inputs)
    return f"""seed = {seed}
[release]
version = "1.0"
[inputs]
paths = [{paths}]
[clean]
enabled = {str(clean).lower()}
[dedup]
enabled = {str(dedup).lower()}
[tokenizer]
vocab_size = {vocab_size}
input_sentence_size = 20000
[pack]
seq_len = {seq_len}
strategy = "bestfit"
[split]
validation_fraction = {validation_fraction}
[shard]
max_bytes = {shard_max_bytes}
"""


def build_release(tmp, docs=None, **config):
    """Writes the corpus and a config into tmp and runs `grist build`; returns the release path."""
    os.makedirs(tmp, exist_ok=True)
    corpus = os.path.join(tmp, "corpus.jsonl")
    write_jsonl(corpus, docs if docs is not None else synthetic_documents(300))
    cfg = os.path.join(tmp, "release.toml")
    with open(cfg, "w") as f:
        f.write(release_config([corpus], **config))
    out = os.path.join(tmp, "rel")
    run_grist("build", "--config", cfg, "--output", out, "--quiet")
    return out


def manifest(release):
    with open(os.path.join(release, "manifest.json")) as f:
        return json.load(f)


_HOOKS = None


def require_test_hooks(test):
    """Skips `test` (a unittest.TestCase) unless the grist library under test has the named crash
    points compiled in (-DGRIST_TEST_HOOKS=ON, as scripts/test.sh configures it); fails instead
    under GRIST_REQUIRE_TEST_HOOKS=1, so CI cannot skip a hook test. Probed once per process: a
    child saves a tiny checkpoint with GRIST_CRASH_TRACE set, and only a build with the hooks
    writes the trace."""
    global _HOOKS
    if _HOOKS is None:
        import sys
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            trace = os.path.join(tmp, "trace")
            code = ("import sys, torch, grist; "
                    "grist.ckpt.save({'x': torch.zeros(4)}, sys.argv[1], blocking=True)")
            subprocess.run([sys.executable, "-c", code, os.path.join(tmp, "step-00000001")],
                           env=dict(os.environ, GRIST_CRASH_TRACE=trace), check=True,
                           capture_output=True, timeout=120)
            _HOOKS = os.path.exists(trace)
    if not _HOOKS:
        if os.environ.get("GRIST_REQUIRE_TEST_HOOKS") == "1":
            test.fail("GRIST_REQUIRE_TEST_HOOKS=1 but grist was built without the test hooks "
                      "(configure with -DGRIST_TEST_HOOKS=ON)")
        test.skipTest("the test hooks are compiled out (GRIST_TEST_HOOKS=OFF; scripts/test.sh "
                      "configures with -DGRIST_TEST_HOOKS=ON)")


def run_ranks(fn, world, root, timeout=300):
    """Runs fn(rank, world, init_file, root, queue) in `world` spawned processes (init_file: a
    file:// rendezvous in root for torch.distributed) and returns what they put on the queue,
    sorted by its first item (the rank). Stops waiting at `timeout` seconds, or as soon as every
    rank still alive has reported (a rank that died puts nothing); kills what is left."""
    import time
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    init_file = os.path.join(root, f"init-{fn.__name__}")
    procs = [ctx.Process(target=fn, args=(r, world, init_file, root, q)) for r in range(world)]
    for p in procs:
        p.start()
    out = []
    try:
        deadline = time.monotonic() + timeout
        alive = world
        while len(out) < alive and time.monotonic() < deadline:
            try:
                out.append(q.get(timeout=1))
            except Exception:
                alive = world - sum(1 for p in procs if p.exitcode not in (None, 0))
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    return sorted(out, key=lambda r: r[0])
