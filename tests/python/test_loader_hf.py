"""grist.Loader under the Hugging Face Trainer (grist.data.trainer_dataloader): the Trainer trains
on exactly the loader's micro batches, with grist's next-token targets unshifted (a transformers
causal LM shifts `labels` itself; grist's are already shifted), padding excluded from the loss.

Checked by training a tiny Llama for three SGD steps with the Trainer and by hand (the same
micro batches, the masked cross entropy of grist's targets summed over each step's micro batches
and divided by the step's target count, as the Trainer's loss does): the parameters agree to
float rounding. A view that passed grist's labels as `labels` alone (shifted a second time) moves
them far apart."""

import itertools
import os
import tempfile
import unittest

import torch
import torch.nn.functional as F

import grist
from grist.loader import write_synthetic_release

try:
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments
    HAVE_TRAINER = True
except ImportError:  # transformers or accelerate missing
    HAVE_TRAINER = False

VOCAB = 128
STEPS = 3
# Plain SGD: the parameters move by lr x gradient, so comparing them compares the gradients (the
# first steps of Adam move every parameter by about +-lr whatever the gradient's size, so float
# noise in a tiny gradient flips a whole step).
LR = 1.0


def _model():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=2, num_attention_heads=4,
                                        num_key_value_heads=4, max_position_embeddings=64))


@unittest.skipUnless(HAVE_TRAINER, "transformers' Trainer (with accelerate) is not installed")
class HFTrainerTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.release = os.path.join(self.tmp.name, "release")
        write_synthetic_release(self.release, samples=64, seq_len=32, vocab_size=VOCAB,
                                mean_document_tokens=12)

    def tearDown(self):
        self.tmp.cleanup()

    def _loader(self):
        return grist.Loader(self.release, micro_batch_size=4, global_batch_size=8, epochs=0,
                            seed=5)

    def _by_hand(self):
        model = _model()
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        loader = self._loader()
        it = iter(loader)
        for _ in range(STEPS):
            micro = [next(it) for _ in range(loader.micro_batches_per_step)]
            n = sum(int(b["loss_mask"].sum()) for b in micro)
            opt.zero_grad()
            for b in micro:
                # use_cache=False as the Trainer sets it: transformers then reads the restarts of
                # grist's position_ids as document boundaries (no attention across documents).
                logits = model(input_ids=b["input_ids"], position_ids=b["position_ids"],
                               use_cache=False).logits
                target = b["labels"].masked_fill(b["loss_mask"] == 0, -100)
                loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), target.reshape(-1),
                                       ignore_index=-100, reduction="sum") / n
                loss.backward()
            opt.step()
        loader.close()
        return model

    def _with_trainer(self, make_dataloader):
        model = _model()
        loader = self._loader()

        class GristTrainer(Trainer):
            def get_train_dataloader(self):
                return make_dataloader(loader)

        args = TrainingArguments(
            output_dir=os.path.join(self.tmp.name, "out"), max_steps=STEPS,
            per_device_train_batch_size=4, gradient_accumulation_steps=loader.micro_batches_per_step,
            learning_rate=LR, weight_decay=0.0, lr_scheduler_type="constant", warmup_steps=0,
            max_grad_norm=0.0, optim="sgd", use_cpu=True, report_to=[], save_strategy="no",
            logging_steps=1, disable_tqdm=True, dataloader_num_workers=0, seed=0)
        GristTrainer(model=model, args=args).train()
        loader.close()
        return model

    def _max_diff(self, a, b):
        return max((pa - pb).abs().max().item()
                   for pa, pb in zip(a.parameters(), b.parameters()))

    def test_trainer_trains_on_the_loaders_batches_with_unshifted_targets(self):
        ref = self._by_hand()
        got = self._with_trainer(grist.data.trainer_dataloader)
        moved = self._max_diff(ref, _model())
        self.assertGreater(moved, 1e-3)  # the steps changed the parameters
        self.assertLess(self._max_diff(ref, got), 1e-5 * max(1.0, moved), transformers.__version__)

        # Passing grist's labels as `labels` alone: the model shifts them again, one token off.
        def shifted_twice(loader):
            items = [{"input_ids": b["input_ids"], "position_ids": b["position_ids"],
                      "labels": b["labels"].masked_fill(b["loss_mask"] == 0, -100)}
                     for b in itertools.islice(loader, STEPS * loader.micro_batches_per_step)]
            return torch.utils.data.DataLoader(items, batch_size=None)
        wrong = self._with_trainer(shifted_twice)
        self.assertGreater(self._max_diff(ref, wrong), 100 * self._max_diff(ref, got))

    def test_hf_items_and_their_checks(self):
        plain, view = self._loader(), self._loader()
        b = next(iter(plain))
        item = next(iter(view.as_dataset(hf=True)))  # the same first micro batch, HF's keys
        plain.close()
        view.close()
        self.assertEqual(sorted(item), ["input_ids", "labels", "position_ids", "shift_labels"])
        self.assertTrue(torch.equal(item["input_ids"], b["input_ids"]))
        want = b["labels"].masked_fill(b["loss_mask"] == 0, -100)
        self.assertTrue(torch.equal(item["labels"], want))
        self.assertTrue(torch.equal(item["shift_labels"], want))
        with self.assertRaisesRegex(KeyError, "loss_mask"):
            grist.data.hf_batch({"input_ids": b["input_ids"], "labels": b["labels"],
                                 "position_ids": b["position_ids"]})


if __name__ == "__main__":
    unittest.main()
