"""Conformance of a grist release with megatron-core (pinned in requirements.txt, used unchanged):
Megatron's IndexedDataset opens every token file of a release, its GPTDataset (built through
BlendedMegatronDatasetBuilder) builds over the document files, and every token of every kept
document appears in Megatron's epoch. docs/formats/release.md ("What Megatron reads") states what
these tests check.

megatron-core needs nothing extra on CPU: its wheel ships the compiled dataset helpers
(megatron/core/datasets/helpers_cpp*.so), so BlendedMegatronDatasetBuilder does not compile anything
(only megatron.core.datasets.utils.compile_helpers would, and nothing here calls it); importing it
without Transformer Engine or Apex only warns.
"""

import os
import subprocess
import warnings
from collections import Counter

import numpy as np
import pytest

import grist_testkit as kit

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from megatron.core.datasets.blended_megatron_dataset_builder import \
        BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.indexed_dataset import IndexedDataset

SEQ = 64


class Tokenizer:
    """What GPTDatasetConfig reads of a tokenizer: vocab_size, eod (and pad, absent here)."""

    def __init__(self, vocab_size, eod):
        self.vocab_size = vocab_size
        self.eod = eod
        self.eos = eod
        # Part of Megatron's dataset description (its cache key).
        self.unique_identifiers = {"class": "grist-test", "vocab_size": vocab_size, "eod": eod}


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("megatron"))
    rel = kit.build_release(tmp, seq_len=SEQ, validation_fraction=0.2, shard_max_bytes=4096)
    return rel, kit.manifest(rel), tmp


def read_seg(path):
    """Sample k's segments of a .seg file (docs/formats/release.md) as (length, is_padding)."""
    raw = open(path, "rb").read()
    assert raw[:8] == b"GRISTSEG"
    n, m = np.frombuffer(raw, np.uint64, 2, 24)
    offsets = np.frombuffer(raw, np.uint64, int(n) + 1, 40)
    words = np.frombuffer(raw, np.uint32, int(m), 40 + 8 * (int(n) + 1))
    return [[(int(w) & 0x7FFFFFFF, bool(int(w) >> 31)) for w in words[offsets[k]:offsets[k + 1]]]
            for k in range(int(n))]


def documents(prefix):
    ds = IndexedDataset(prefix)
    return [np.array(ds[i]) for i in range(len(ds))]


def test_indexed_dataset_opens_every_token_file(release):
    rel, m, tmp = release
    dtype = np.uint16 if m["token_dtype"] == "uint16" else np.int32
    st, eos = m["sample_tokens"], m["tokenizer"]["eos_id"]
    for split in ("train", "validation"):
        s = m["splits"][split]
        assert s["shards"], split
        shard_doc_tokens = Counter()
        for sh in s["shards"]:
            ds = IndexedDataset(os.path.join(rel, sh["name"]))
            raw = np.fromfile(os.path.join(rel, sh["bin"]["path"]), dtype=dtype).reshape(-1, st)
            assert len(ds) == sh["samples"] == raw.shape[0]
            assert ds.index.dtype == dtype
            assert list(ds.sequence_lengths) == [st] * sh["samples"]
            assert list(ds.document_indices) == list(range(sh["samples"] + 1))
            for k, segs in enumerate(read_seg(os.path.join(rel, sh["seg"]["path"]))):
                sample = np.array(ds[k])
                assert np.array_equal(sample, raw[k])
                pos = 0
                for length, pad in segs:
                    if not pad:
                        shard_doc_tokens.update(sample[pos:pos + length].tolist())
                    pos += length
        df = s["documents_file"]
        assert df["name"] == f"documents/{split}"
        docs = documents(os.path.join(rel, df["name"]))
        assert len(docs) == df["sequences"] == s["documents"]
        assert sum(map(len, docs)) == df["tokens"]
        assert IndexedDataset(os.path.join(rel, df["name"])).index.dtype == dtype
        assert all(len(d) > 0 and d[-1] == eos for d in docs)
        assert df["eod_appended"] == 0  # tokenize.add_eos = true: every document ends in EOS
        # The shards' document positions hold exactly the document file's tokens.
        assert shard_doc_tokens == Counter(np.concatenate(docs).tolist()), split
    # Every tokenized (kept) document is one sequence of one split's document file.
    work = rel + ".work/tokens"
    encoded = []
    for name in sorted(os.listdir(work)):
        if name.endswith(".idx"):
            encoded += documents(os.path.join(work, name[:-4]))
    released = documents(os.path.join(rel, "documents/train")) + \
        documents(os.path.join(rel, "documents/validation"))
    assert len(encoded) == 300  # clean and dedup are off: every input document is kept
    def key(d):
        return np.asarray(d, dtype=np.int64).tobytes()
    assert Counter(map(key, encoded)) == Counter(map(key, released))


def megatron_epoch(ds):
    """Megatron's windows in its sample order (before its shuffle), as token arrays."""
    order = np.empty(len(ds), dtype=np.int64)
    order[np.asarray(ds.shuffle_index)] = np.arange(len(ds))
    out = []
    for j in range(len(ds)):
        s = ds[int(order[j])]
        out.append(np.concatenate([s["tokens"].numpy(), s["labels"].numpy()[-1:]]))
    return out


def build(m, cache, blend_per_split, **kw):
    config = GPTDatasetConfig(
        random_seed=1234, sequence_length=kw.pop("sequence_length", SEQ),
        blend_per_split=blend_per_split, reset_position_ids=False, reset_attention_mask=False,
        eod_mask_loss=False, path_to_cache=cache,
        tokenizer=Tokenizer(m["tokenizer"]["vocab_size"], m["tokenizer"]["eos_id"]), **kw)
    return BlendedMegatronDatasetBuilder(GPTDataset, [None, None, None], lambda: True,
                                         config).build()


def test_gpt_dataset_epoch_holds_every_document_token(release):
    rel, m, tmp = release
    train_p, valid_p = os.path.join(rel, "documents/train"), os.path.join(rel, "documents/validation")
    train, valid, test = build(m, os.path.join(tmp, "cache1"),
                               [([train_p], None), ([valid_p], None), None],
                               drop_last_partial_validation_sequence=False)
    assert test is None
    for ds, prefix, drop_last in ((train, train_p, True), (valid, valid_p, False)):
        docs = documents(prefix)
        # One epoch: every document once, in Megatron's document order.
        assert sorted(np.asarray(ds.document_index).tolist()) == list(range(len(docs)))
        stream = np.concatenate([docs[d] for d in np.asarray(ds.document_index)]).astype(np.int64)
        windows = megatron_epoch(ds)
        for j, w in enumerate(windows):  # windows of SEQ + 1 tokens, overlapping by one
            want = stream[j * SEQ:j * SEQ + SEQ + 1]
            assert len(w) == SEQ + 1
            assert np.array_equal(w[:len(want)], want), j
        covered = len(windows) * SEQ + 1
        if drop_last:
            # Megatron drops the train epoch's last partial window: fewer than SEQ tokens.
            assert len(windows) == (len(stream) - 1) // SEQ
            assert 0 <= len(stream) - covered < SEQ
        else:
            assert covered >= len(stream)  # every token, the last window padded
    # Every token of every train document: the epoch holds the whole stream but its tail.
    assert len(train) > 10 and len(valid) > 1


def test_packed_shards_as_megatron_sees_them(release):
    rel, m, tmp = release
    st = m["sample_tokens"]
    sh = m["splits"]["train"]["shards"][0]
    prefix = os.path.join(rel, sh["name"])
    grist_samples = {np.array(s, dtype=np.int64).tobytes() for s in documents(prefix)}
    assert len(grist_samples) == sh["samples"]
    # Defaults: windows of SEQ + 1 tokens overlapping by one, across shuffled grist samples.
    (ds, _, _) = build(m, os.path.join(tmp, "cache2"), [([prefix], None), None, None])
    windows = megatron_epoch(ds)
    assert len(windows) == (sh["samples"] * st - 1) // SEQ
    # A window is a grist sample only where the two grids meet (j * SEQ a multiple of
    # sample_tokens: the first window, then every SEQ-th sample); the others straddle two.
    aligned = [j for j in range(len(windows)) if (j * SEQ) % st == 0]
    assert [j for j, w in enumerate(windows) if w.tobytes() in grist_samples] == aligned
    assert len(aligned) < len(windows) // 10
    # Fixed-length reading: sequence_length = sample_tokens, no extra token.
    (ds, _, _) = build(m, os.path.join(tmp, "cache3"), [([prefix], None), None, None],
                       sequence_length=st, add_extra_token_to_sequence=False)
    assert len(ds) == sh["samples"]
    seen = [ds[i]["tokens"].numpy().astype(np.int64).tobytes() for i in range(len(ds))]
    assert sorted(seen) == sorted(grist_samples)  # each grist sample exactly once


def test_inspect_megatron_prints_the_arguments(release):
    rel, m, tmp = release
    out = kit.run_grist("inspect", "--megatron", rel).stdout
    absrel = os.path.abspath(rel)
    lines = [l for l in out.splitlines() if not l.startswith("#")]
    assert lines[0] == f"--data-path {absrel}/documents/train --split 100,0,0"
    assert f"# --train-data-path {absrel}/documents/train --valid-data-path " \
           f"{absrel}/documents/validation" in out
    assert lines[1] == (f"--seq-length {SEQ} --tokenizer-type GPTSentencePieceTokenizer "
                        f"--tokenizer-model {absrel}/tokenizer.model")
    assert len(IndexedDataset(f"{absrel}/documents/train")) == \
        m["splits"]["train"]["documents_file"]["sequences"]
    kit.run_grist("verify", rel)


def test_verify_checks_the_document_files(release):
    rel, m, tmp = release
    bad = os.path.join(tmp, "bad")
    subprocess.run(["cp", "-r", rel, bad], check=True)
    path = os.path.join(bad, "documents/validation.bin")
    raw = bytearray(open(path, "rb").read())
    raw[0] ^= 1
    open(path, "wb").write(bytes(raw))
    p = kit.run_grist("verify", bad, check=False)
    assert p.returncode != 0
    assert "documents/validation.bin: XXH3-128" in p.stderr
    os.truncate(path, len(raw) - 2)
    p = kit.run_grist("verify", bad, check=False)
    assert p.returncode != 0 and "documents/validation.bin" in p.stderr
