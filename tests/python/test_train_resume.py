"""The course's "resume from checkpoint" and "loss continuous after resume" items, proven: the
example training loop (examples/train.py, grist.Loader + grist.ckpt) is killed with SIGKILL inside
asynchronous checkpoint writes (at named crash points: after the rank file's fsync, before the
manifest rename, during retention) and once from outside at a random moment, and restarted; each
run resumes right after the newest published checkpoint, and every loss it ever logs equals the
uninterrupted run's loss for that step, bit for bit."""

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grist_testkit as kit  # noqa: E402

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

    def _run(self, ckpt, log, release, env=None):
        return subprocess.Popen(self._cmd(ckpt, log, release), stdout=subprocess.DEVNULL,
                                env=dict(os.environ, **(env or {})))

    @staticmethod
    def _latest_step(ckpt):
        import grist
        newest = grist.ckpt.latest(ckpt)
        return 0 if newest is None else int(os.path.basename(newest).split("-")[1])

    def test_sigkill_and_resume_gives_identical_losses(self):
        kit.require_test_hooks(self)  # the kills land at named crash points
        rng = random.Random(13)
        with tempfile.TemporaryDirectory() as tmp:
            from grist.loader import write_synthetic_release
            release = os.path.join(tmp, "release")
            write_synthetic_release(release, samples=512, seq_len=64, vocab_size=512,
                                    mean_document_tokens=20)
            ref_log, trace = os.path.join(tmp, "ref.log"), os.path.join(tmp, "trace")
            p = self._run(os.path.join(tmp, "ref"), ref_log, release, {"GRIST_CRASH_TRACE": trace})
            self.assertEqual(p.wait(timeout=300), 0)
            reference = dict(_read_log(ref_log))
            self.assertEqual(sorted(reference), list(range(1, self.STEPS + 1)))
            self.assertTrue(os.path.exists(trace))  # require_test_hooks() said they are in
            with open(trace) as f:
                reached = set(f.read().split())
            self.assertLessEqual({"ckptio.file.after_fsync", "ckptio.publish.before_rename",
                                  "ckptio.retention.during_remove"}, reached)

            # Each run is killed once: three exactly inside a checkpoint write (by the crash
            # point, SIGKILL raised by the process itself), one from outside at a random moment.
            # Every run must resume at the step after the newest published checkpoint.
            kills = [("ckptio.publish.before_rename@3", "data durable, manifest not renamed"),
                     ("ckptio.file.after_fsync@2", "rank file fsynced, no manifest"),
                     (None, "from outside, anywhere"),
                     ("ckptio.retention.during_remove@1", "new one published, old half deleted")]
            ckpt, log = os.path.join(tmp, "ckpt"), os.path.join(tmp, "run.log")
            resumed_at = 0  # the step the next run must log first, minus one
            for point, what in kills:
                with self.subTest(kill=what):
                    before = len(_read_log(log))
                    if point is not None:
                        p = self._run(ckpt, log, release, {"GRIST_CRASH_POINT": point})
                        self.assertEqual(p.wait(timeout=300), -signal.SIGKILL)
                    else:
                        p = self._run(ckpt, log, release)
                        target = resumed_at + rng.randint(2, 6)
                        deadline = time.time() + 120
                        while time.time() < deadline and p.poll() is None:
                            new = _read_log(log)[before:]
                            if new and new[-1][0] >= target:
                                break
                            time.sleep(0.005)
                        time.sleep(rng.random() * 0.05)  # land anywhere, also inside a write
                        self.assertIsNone(p.poll(), "the run ended before it could be killed")
                        p.send_signal(signal.SIGKILL)
                        p.wait(timeout=60)
                    new = _read_log(log)[before:]
                    self.assertTrue(new, "the run logged no step before it was killed")
                    self.assertEqual(new[0][0], resumed_at + 1, "did not resume after the newest "
                                     "published checkpoint")
                    resumed_at = self._latest_step(ckpt)
                    if point is not None and "retention" not in point:
                        # Killed while writing the checkpoint of its last logged step or earlier:
                        # that one is not published, so the next run redoes logged steps.
                        self.assertLess(resumed_at, new[-1][0])
            # The last run goes to the end.
            before = len(_read_log(log))
            self.assertEqual(self._run(ckpt, log, release).wait(timeout=300), 0)
            self.assertEqual(_read_log(log)[before][0], resumed_at + 1)

            logged = _read_log(log)
            self.assertEqual(logged[-1][0], self.STEPS)
            for step, loss in logged:
                self.assertEqual(loss, reference[step], f"step {step} differs after a resume")
            self.assertEqual({s for s, _ in logged}, set(range(1, self.STEPS + 1)))
            # Redone steps: the kills inside checkpoint writes lost logged steps.
            self.assertGreater(len(logged), self.STEPS)
            import grist
            newest = grist.ckpt.latest(ckpt)
            self.assertTrue(newest.endswith(f"step-{self.STEPS:08d}"))
            grist.ckpt.verify(newest)
            self.assertLessEqual(len(grist.ckpt.list_checkpoints(ckpt)), 2)


if __name__ == "__main__":
    unittest.main()
