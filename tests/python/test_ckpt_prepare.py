"""grist.ckpt.prepare: the first save of a process, with its staging memory prepared in the
background, touches no fresh memory on the caller's time: the writer counts it (the arena is
allocated once, by prepare(), and the save's file_info["staging_fresh_bytes"] is 0), while the
same first save through an unprepared writer allocates and touches its whole image. The prepare
limit (GRIST_CKPT_PREPARE_MAX) is honoured. Each case runs in a fresh process (a process's first
save is what is checked). No timing is asserted: the blocked time against a memcpy is a benchmark
(bench/python/bench_ckpt_first_save.py). Time: about 10 s."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

_FIRST_SAVE = r"""
import json, os, sys
import torch
from grist import ckpt
root = sys.argv[1]
prepare = sys.argv[2] == "1"
torch.manual_seed(0)
state = {"model": {f"layers.{i}.weight": torch.randn(4 << 20) for i in range(8)}, "step": 3}  # 128 MiB
nbytes = sum(t.numel() * t.element_size() for t in state["model"].values())
before = ckpt._staging()
prepared = ckpt.prepare(state, wait=True) if prepare else 0
ready = ckpt._staging()
h = ckpt.save(state, os.path.join(root, "step-3"))
h.wait()
after = ckpt._staging()
second = ckpt.save(state, os.path.join(root, "step-4"))
second.wait()
# The same first save through a writer nobody prepared (other I/O settings: another writer).
h2 = ckpt.save(state, os.path.join(root, "step-5"), queue_depth=8)
h2.wait()
loaded = ckpt.load(h.path)
ok = all(torch.equal(loaded["model"][k], v) for k, v in state["model"].items())
image = h.file_info["record"]["size"]
print(json.dumps({"prepared": prepared, "before": before, "ready": ready, "after": after,
                  "fresh": h.file_info["staging_fresh_bytes"],
                  "second_fresh": second.file_info["staging_fresh_bytes"],
                  "unprepared_fresh": h2.file_info["staging_fresh_bytes"],
                  "unprepared": ckpt._staging(queue_depth=8), "image": image, "nbytes": nbytes,
                  "equal": ok}))
"""


def _run(root, prepare, env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, "-c", _FIRST_SAVE, root, "1" if prepare else "0"],
                         env=env, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise AssertionError(f"child failed:\n{out.stdout}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _round4k(n):
    return (n + 4095) // 4096 * 4096


class PrepareTest(unittest.TestCase):
    def test_the_first_save_after_prepare_touches_no_fresh_memory(self):
        with tempfile.TemporaryDirectory() as root:
            r = _run(root, prepare=True)
        self.assertTrue(r["equal"])
        self.assertEqual(r["before"]["allocations"], 0)
        self.assertGreater(r["prepared"], r["nbytes"])
        self.assertEqual(r["ready"]["held"], r["prepared"])  # ready when prepare(wait=True) returned
        self.assertEqual(r["ready"]["allocations"], 1)        # allocated by prepare()
        # The first save found every page of its image resident and allocated nothing.
        self.assertEqual(r["fresh"], 0)
        self.assertEqual(r["after"], r["ready"])
        self.assertEqual(r["second_fresh"], 0)
        # The unprepared writer's first save allocated its arena and touched its whole image (the
        # file rounded to the 4096 alignment) on the caller's time.
        self.assertEqual(r["unprepared"]["allocations"], 1)
        self.assertEqual(r["unprepared_fresh"], _round4k(r["image"]))

    def test_without_prepare_the_first_save_touches_its_image(self):
        with tempfile.TemporaryDirectory() as root:
            r = _run(root, prepare=False)
        self.assertTrue(r["equal"])
        self.assertEqual(r["ready"]["allocations"], 0)
        self.assertEqual(r["fresh"], _round4k(r["image"]))
        self.assertEqual(r["after"]["allocations"], 1)
        self.assertEqual(r["second_fresh"], 0)  # the arena it allocated serves the next save

    def test_the_prepare_limit_is_honoured(self):
        with tempfile.TemporaryDirectory() as root:
            over = _run(root, prepare=True, env_extra={"GRIST_CKPT_PREPARE_MAX": "64M"})
        self.assertEqual(over["ready"]["limit"], 64 << 20)
        self.assertEqual(over["prepared"], 0)  # 128 MiB does not fit: nothing prepared
        self.assertEqual(over["ready"]["held"], 0)
        self.assertEqual(over["ready"]["allocations"], 0)
        self.assertTrue(over["equal"])         # the save still works, on the caller's time
        self.assertEqual(over["fresh"], _round4k(over["image"]))
        self.assertGreaterEqual(over["after"]["held"], over["nbytes"])
        with tempfile.TemporaryDirectory() as root:
            fits = _run(root, prepare=True, env_extra={"GRIST_CKPT_PREPARE_MAX": "130M"})
        self.assertEqual(fits["ready"]["limit"], 130 << 20)
        self.assertGreater(fits["ready"]["held"], fits["nbytes"])
        self.assertLessEqual(fits["ready"]["held"], 130 << 20)  # the headroom stops at the limit
        self.assertEqual(fits["fresh"], 0)
        self.assertTrue(fits["equal"])

    def test_prepare_takes_a_byte_count(self):
        from grist import ckpt
        n = ckpt.prepare(8 << 20, wait=True, queue_depth=8)
        self.assertGreaterEqual(n, 8 << 20)
        self.assertEqual(ckpt._staging(queue_depth=8)["held"], n)


if __name__ == "__main__":
    unittest.main()
