"""examples/train_fsdp.py under torchrun (CPU, gloo): FSDP2 training with grist.Loader and
grist.ckpt, resumed from a world-2 checkpoint at world 1 and at world 2 with the same global batch:
the losses continue (bit for bit at the same world size; at another one within a relative 1e-4:
the sums run in another order, see the example's docstring), and every rank's first save touched
no fresh staging memory (the example prepares it after the first step)."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grist_testkit as kit  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "train_fsdp.py")


def run(world, ckpt_dir, log, steps):
    cmd = kit.torchrun(world) + [SCRIPT, "--ckpt-dir", ckpt_dir, "--steps", str(steps),
                                 "--loss-log", log]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise AssertionError(f"{cmd} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    with open(log) as f:
        return out.stdout, {int(a): float.fromhex(b) for a, b in (ln.split() for ln in f)}


def first_save_fresh(out):
    """{rank: staging bytes its first save touched on the caller's time}, as the example prints."""
    return {int(r): int(n) for r, n in re.findall(
        r"rank (\d+): first save blocked [0-9.]+ s, (\d+) bytes of staging memory touched", out)}


class FsdpExampleTest(unittest.TestCase):
    def test_resume_at_another_world_size_continues_the_losses(self):
        with tempfile.TemporaryDirectory() as tmp:
            a = os.path.join(tmp, "a")
            out, ref = run(2, a, os.path.join(tmp, "a.log"), 6)
            # Each rank prepared its staging memory after the first step (grist.ckpt.prepare): its
            # first save touched none on the training loop's time, as the writer counts it.
            self.assertEqual(first_save_fresh(out), {0: 0, 1: 0})
            self.assertEqual(sorted(ref), [1, 2, 3, 4, 5, 6])
            for world in (2, 1):
                b = os.path.join(tmp, f"b{world}")
                os.makedirs(b)
                shutil.copytree(os.path.join(a, "step-00000003"), os.path.join(b, "step-00000003"))
                shutil.copytree(os.path.join(a, "release"), os.path.join(b, "release"))
                out, got = run(world, b, os.path.join(tmp, f"b{world}.log"), 6)
                self.assertIn(f"saved by 2 rank(s), now {world}", out)
                self.assertEqual(first_save_fresh(out), {r: 0 for r in range(world)})
                self.assertEqual(sorted(got), [4, 5, 6])
                for s in (4, 5, 6):
                    if world == 2:
                        self.assertEqual(got[s].hex(), ref[s].hex(), s)
                    else:
                        self.assertLess(abs(got[s] - ref[s]), 1e-4 * abs(ref[s]), s)


if __name__ == "__main__":
    unittest.main()
