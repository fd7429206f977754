"""grist.ckpt.prepare: the first save of a process, with its staging memory prepared in the
background, blocks for about a memcpy of its bytes; the prepare limit (GRIST_CKPT_PREPARE_MAX) is
honoured. Each case runs in a fresh process (a process's first save is what is measured)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

_FIRST_SAVE = r"""
import json, os, sys, time
import torch
import grist
from grist import ckpt
from grist._native import lib
root = sys.argv[1]
prepare = sys.argv[2] == "1"
torch.manual_seed(0)
state = {"model": {f"layers.{i}.weight": torch.randn(4 << 20) for i in range(8)}, "step": 3}  # 128 MiB
nbytes = sum(t.numel() * t.element_size() for t in state["model"].values())
threads = lib.grist_ckpt_default_copy_threads()
prepared = ckpt.prepare(state, wait=True) if prepare else 0
held, limit = ckpt._staging()
src = torch.cat([t for t in state["model"].values()])
dst = torch.empty_like(src)
dst.fill_(0)  # warm
memcpys = []
def memcpy():
    t0 = time.perf_counter()
    lib.grist_ckpt_memcpy(dst.data_ptr(), src.data_ptr(), nbytes, threads)
    memcpys.append(time.perf_counter() - t0)
for _ in range(3):
    memcpy()
h = ckpt.save(state, os.path.join(root, "step-3"))
blocked = h.blocked_seconds
h.wait()
for _ in range(2):
    memcpy()
held_after, _ = ckpt._staging()
# The same save through a writer nobody prepared (other I/O settings: another writer, fresh memory).
h2 = ckpt.save(state, os.path.join(root, "step-4"), queue_depth=8)
unprepared = h2.blocked_seconds
h2.wait()
loaded = ckpt.load(h.path)
ok = all(torch.equal(loaded["model"][k], v) for k, v in state["model"].items())
print(json.dumps({"blocked": blocked, "unprepared": unprepared, "memcpy": sorted(memcpys)[2], "prepared": prepared,
                  "held": held, "held_after": held_after, "limit": limit, "nbytes": nbytes,
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


class PrepareTest(unittest.TestCase):
    def test_first_save_after_prepare_blocks_for_about_a_memcpy(self):
        with tempfile.TemporaryDirectory() as root:
            r = _run(root, prepare=True)
        self.assertTrue(r["equal"])
        self.assertGreater(r["prepared"], r["nbytes"])
        self.assertEqual(r["held"], r["prepared"])      # ready when prepare(wait=True) returned
        self.assertEqual(r["held_after"], r["held"])    # the save used it: nothing reallocated
        # The memcpy is the median of 5 with the writer's copy thread count, 3 before the save and
        # 2 after it, in the same process. Generous for a loaded 2-core CI machine; without
        # prepare() this first save blocked 3-27x the memcpy on the development VM (fresh memory
        # faulted in on the caller's time), with it 0.7-2.6x.
        self.assertLess(r["blocked"], 3 * r["memcpy"] + 0.03,
                        f"first save blocked {r['blocked']:.4f} s for a {r['memcpy']:.4f} s memcpy")
        # And it is what the preparation saves: the same first save through an unprepared writer
        # (measured 0.030-0.049 s against 0.011-0.012 s prepared on the development VM).
        self.assertLess(r["blocked"], r["unprepared"],
                        f"prepared {r['blocked']:.4f} s, unprepared {r['unprepared']:.4f} s")

    def test_the_prepare_limit_is_honoured(self):
        with tempfile.TemporaryDirectory() as root:
            over = _run(root, prepare=True, env_extra={"GRIST_CKPT_PREPARE_MAX": "64M"})
        self.assertEqual(over["limit"], 64 << 20)
        self.assertEqual(over["prepared"], 0)  # 128 MiB does not fit: nothing prepared
        self.assertEqual(over["held"], 0)
        self.assertTrue(over["equal"])         # the save still works, on the caller's time
        self.assertGreaterEqual(over["held_after"], over["nbytes"])
        with tempfile.TemporaryDirectory() as root:
            fits = _run(root, prepare=True, env_extra={"GRIST_CKPT_PREPARE_MAX": "130M"})
        self.assertEqual(fits["limit"], 130 << 20)
        self.assertGreater(fits["held"], fits["nbytes"])
        self.assertLessEqual(fits["held"], 130 << 20)  # the headroom stops at the limit
        self.assertTrue(fits["equal"])

    def test_prepare_takes_a_byte_count(self):
        from grist import ckpt
        n = ckpt.prepare(8 << 20, wait=True, queue_depth=8)
        self.assertGreaterEqual(n, 8 << 20)
        held, _ = ckpt._staging(queue_depth=8)
        self.assertEqual(held, n)


if __name__ == "__main__":
    unittest.main()
