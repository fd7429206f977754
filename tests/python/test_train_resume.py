"""The course's "resume from checkpoint" and "loss continuous after resume" items, proven: the
example training loop (examples/train.py, grist.Loader + grist.ckpt) is killed with SIGKILL at
random moments, including in the middle of an asynchronous checkpoint write, and restarted; every
loss it ever logs equals the uninterrupted run's loss for that step, bit for bit."""

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "examples", "train.py")

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def _read_log(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and line.endswith("\n"):
                    out.append((int(parts[0]), parts[1]))
    return out


@unittest.skipUnless(HAVE_TORCH, "torch is not importable by this python")
class TrainResumeTest(unittest.TestCase):
    STEPS = 30

    # GRIST_TEST_DEVICE=cuda runs the same proof on a GPU (deterministic settings in train.py).
    DEVICE = os.environ.get("GRIST_TEST_DEVICE", "cpu")

    def _cmd(self, ckpt, log, release):
        return [sys.executable, TRAIN, "--ckpt-dir", ckpt, "--log", log, "--steps", str(self.STEPS),
                "--ckpt-every", "3", "--keep", "2", "--release", release, "--dim", "256",
                "--device", self.DEVICE]

    def test_sigkill_and_resume_gives_identical_losses(self):
        rng = random.Random(13)
        with tempfile.TemporaryDirectory() as tmp:
            from grist.loader import write_synthetic_release
            release = os.path.join(tmp, "release")
            write_synthetic_release(release, samples=512, seq_len=64, vocab_size=512,
                                    mean_document_tokens=20)
            ref_log = os.path.join(tmp, "ref.log")
            subprocess.run(self._cmd(os.path.join(tmp, "ref"), ref_log, release), check=True,
                           stdout=subprocess.DEVNULL, timeout=300)
            reference = dict(_read_log(ref_log))
            self.assertEqual(sorted(reference), list(range(1, self.STEPS + 1)))

            ckpt, log = os.path.join(tmp, "ckpt"), os.path.join(tmp, "run.log")
            kills = 0
            for _ in range(4):
                p = subprocess.Popen(self._cmd(ckpt, log, release), stdout=subprocess.DEVNULL)
                target = rng.randint(4, self.STEPS - 4)
                deadline = time.time() + 120
                while time.time() < deadline and p.poll() is None:
                    done = _read_log(log)
                    if done and done[-1][0] >= target:
                        break
                    time.sleep(0.01)
                time.sleep(rng.random() * 0.05)  # land anywhere, also inside a checkpoint write
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                    kills += 1
                p.wait(timeout=60)
            # The last run goes to the end.
            subprocess.run(self._cmd(ckpt, log, release), check=True, stdout=subprocess.DEVNULL,
                           timeout=300)
            self.assertGreaterEqual(kills, 2)

            logged = _read_log(log)
            self.assertEqual(logged[-1][0], self.STEPS)
            steps_seen = set()
            for step, loss in logged:
                self.assertEqual(loss, reference[step], f"step {step} differs after a resume")
                steps_seen.add(step)
            self.assertEqual(steps_seen, set(range(1, self.STEPS + 1)))
            # Resumes happened: some steps were computed more than once (redone after a kill).
            self.assertGreater(len(logged), self.STEPS)
            import grist
            newest = grist.ckpt.latest(ckpt)
            self.assertTrue(newest.endswith(f"step-{self.STEPS:08d}"))
            grist.ckpt.verify(newest)
            self.assertLessEqual(len(grist.ckpt.list_checkpoints(ckpt)), 2)


if __name__ == "__main__":
    unittest.main()
