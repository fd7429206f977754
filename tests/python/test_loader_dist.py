"""grist.Loader in the distributed runtime: data-parallel rank resolution (explicit, dp_group,
device_mesh + dp_dim, default process group, torchrun/srun environment, and the error when a
multi-process environment gives no rank), tensor-parallel peers getting identical batches on a
real 2x2 DeviceMesh, a Loader built before init_process_group under torchrun, and
torch.distributed.checkpoint carrying the loader's state across 4 gloo ranks.

The multi-process parts run this file under torchrun (`--worker`), on CPU with gloo.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grist_testkit as kit  # noqa: E402

import torch

import grist
from grist.loader import resolve_dp, write_synthetic_release

SEQ = 16
G = 24  # divisible by micro batch 2 x dp 1, 2, 3 and 4


def _samples(loader, n=None):
    out = []
    for i, b in enumerate(loader):
        if n is not None and i == n:
            break
        out.append(b["sample_index"].tolist())
    return out


def _worker(rel, out_dir):
    """One torchrun rank: writes what it saw to out_dir/rank-N.json."""
    import torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    res = {}
    # Before init_process_group: RANK/WORLD_SIZE from torchrun, not a silent rank 0 of 1.
    lo = grist.Loader(rel, 2, G, epochs=1)
    res["env"] = [lo.dp_rank, lo.dp_size, lo.rank_source, _samples(lo)]
    dist.init_process_group("gloo")
    lo = grist.Loader(rel, 2, G, epochs=1)
    res["default"] = [lo.dp_rank, lo.dp_size, lo.rank_source, _samples(lo)]
    if world == 4:
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        lo = grist.Loader(rel, 2, 8, device_mesh=mesh)
        res["mesh"] = [lo.dp_rank, lo.dp_size, lo.rank_source, _samples(lo)]
        lo = grist.Loader(rel, 2, 8, device_mesh=mesh, dp_dim="dp")
        res["mesh_named"] = [lo.dp_rank, lo.dp_size, _samples(lo)]
        lo = grist.Loader(rel, 2, 8, dp_group=mesh.get_group("dp"))
        res["group"] = [lo.dp_rank, lo.dp_size, lo.rank_source, _samples(lo)]
        # torch.distributed.checkpoint across the 4 ranks (Stateful protocol), mid-run.
        import torch.distributed.checkpoint as dcp
        lo = grist.Loader(rel, 2, 8, device_mesh=mesh, epochs=0)
        _samples(lo, 5)  # 2 micro batches a step: saved mid-step
        ckpt = os.path.join(out_dir, "dcp")
        dcp.save({"loader": lo}, checkpoint_id=ckpt)
        expect = _samples(lo, 6)
        fresh = grist.Loader(rel, 2, 8, device_mesh=mesh, epochs=0)
        dcp.load({"loader": fresh}, checkpoint_id=ckpt)
        res["dcp"] = [expect, _samples(fresh, 6)]
    with open(os.path.join(out_dir, f"rank-{rank}.json"), "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()


def _step_order(rel, g, steps=None):
    """The global order in steps of g: what dp ranks' slices concatenate to."""
    lo = grist.Loader(rel, 2, g, dp_rank=0, dp_size=1, epochs=1)
    flat = [s for b in _samples(lo) for s in b]
    return [flat[i:i + g] for i in range(0, len(flat) - len(flat) % g, g)]


class RankResolutionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="grist_loader_dist_")
        cls.rel = os.path.join(cls.tmp, "rel")
        write_synthetic_release(cls.rel, samples=72, seq_len=SEQ, samples_per_shard=32,
                                vocab_size=3000, mean_document_tokens=6, seed=11)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def _env(self, **env):
        clean = {k: v for k, v in os.environ.items()
                 if k not in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_PROCID",
                              "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE")}
        clean.update(env)
        return mock.patch.dict(os.environ, clean, clear=True)

    def test_order_of_sources(self):
        with self._env(RANK="3", WORLD_SIZE="4", SLURM_PROCID="1", SLURM_NTASKS="2"):
            self.assertEqual(resolve_dp(1, 2), (1, 2, "explicit"))
            self.assertEqual(resolve_dp(), (3, 4, "RANK/WORLD_SIZE"))
            lo = grist.Loader(self.rel, 2, G)
            self.assertEqual((lo.dp_rank, lo.dp_size, lo.rank_source), (3, 4, "RANK/WORLD_SIZE"))
            lo = grist.Loader(self.rel, 2, G, dp_rank=0, dp_size=2)
            self.assertEqual((lo.dp_rank, lo.dp_size), (0, 2))
        with self._env(SLURM_PROCID="1", SLURM_NTASKS="3"):
            self.assertEqual(resolve_dp(), (1, 3, "SLURM_PROCID/SLURM_NTASKS"))
        with self._env():
            self.assertEqual(resolve_dp(), (0, 1, "single process"))
            self.assertEqual(resolve_dp(dp_size=1), (0, 1, "single process"))
        with self._env(RANK="4", WORLD_SIZE="4"):
            with self.assertRaisesRegex(ValueError, "RANK=4 is out of range for WORLD_SIZE=4"):
                resolve_dp()

    def test_multi_process_environment_without_a_rank_is_an_error(self):
        for var in ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "LOCAL_WORLD_SIZE"):
            with self._env(**{var: "4"}):
                with self.assertRaisesRegex(ValueError, f"{var}=4 says this is one of 4 processes"
                                            ".*pass dp_rank= and dp_size="):
                    grist.Loader(self.rel, 2, G)
                # Explicit coordinates need nothing from the environment.
                self.assertEqual(grist.Loader(self.rel, 2, G, dp_rank=1, dp_size=2).dp_rank, 1)
        with self._env(WORLD_SIZE="1"):
            self.assertEqual(resolve_dp(), (0, 1, "single process"))

    def test_device_mesh_dimension_errors(self):
        class Mesh:  # the two DeviceMesh methods the loader uses, for the error paths
            ndim = 2
            mesh_dim_names = ("pp", "tp")

            def get_local_rank(self, d):
                return 0

            def size(self, d):
                return 2
        with self.assertRaisesRegex(ValueError, "pass dp_dim="):
            resolve_dp(device_mesh=Mesh())
        with self.assertRaisesRegex(ValueError, "no dimension 'dp'"):
            resolve_dp(device_mesh=Mesh(), dp_dim="dp")
        self.assertEqual(resolve_dp(device_mesh=Mesh(), dp_dim=1), (0, 2, "device_mesh"))
        with self.assertRaisesRegex(ValueError, "not both"):
            resolve_dp(device_mesh=Mesh(), dp_group=object())

    def _torchrun(self, nproc):
        out = tempfile.mkdtemp(dir=self.tmp)
        env = {k: v for k, v in os.environ.items()
               if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
        env["OMP_NUM_THREADS"] = "1"
        cmd = kit.torchrun(nproc) + [os.path.abspath(__file__), "--worker", self.rel, out]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
        res = []
        for r in range(nproc):
            with open(os.path.join(out, f"rank-{r}.json")) as f:
                res.append(json.load(f))
        return res

    def _check_partition(self, per_rank, g):
        """per_rank[r] = rank r's micro batches; together they are the global order's steps."""
        d = len(per_rank)
        steps = _step_order(self.rel, g)
        a = g // (2 * d)
        self.assertEqual([len(x) for x in per_rank], [len(steps) * a] * d)
        for t, step in enumerate(steps):
            got = [s for r in range(d) for b in per_rank[r][t * a:(t + 1) * a] for s in b]
            self.assertEqual(got, step, f"step {t}")

    @unittest.skipUnless(torch.distributed.is_available(), "no torch.distributed")
    def test_torchrun_loader_before_and_after_init_process_group(self):
        res = self._torchrun(3)
        for key, source in (("env", "RANK/WORLD_SIZE"), ("default", "default process group")):
            self.assertEqual([r[key][:3] for r in res], [[i, 3, source] for i in range(3)])
            self._check_partition([r[key][3] for r in res], G)

    @unittest.skipUnless(torch.distributed.is_available(), "no torch.distributed")
    def test_2x2_device_mesh_tp_peers_get_identical_batches_and_dcp_round_trip(self):
        res = self._torchrun(4)
        # Global rank = dp * 2 + tp.
        for r in range(4):
            self.assertEqual(res[r]["mesh"][:3], [r // 2, 2, "device_mesh"])
            self.assertEqual(res[r]["group"][:3], [r // 2, 2, "dp_group"])
            self.assertEqual(res[r]["mesh_named"][:2], [r // 2, 2])
            self.assertEqual(res[r]["mesh"][3], res[r]["group"][3])
            self.assertEqual(res[r]["mesh"][3], res[r]["mesh_named"][2])
            self.assertEqual(res[r]["dcp"][0], res[r]["dcp"][1], f"rank {r} after dcp.load")
        for dp in range(2):
            self.assertEqual(res[2 * dp]["mesh"][3], res[2 * dp + 1]["mesh"][3],
                             f"tp peers of dp rank {dp} differ")
        self._check_partition([res[0]["mesh"][3], res[2]["mesh"][3]], 8)
        # Without the mesh, the default group's global rank would split 4 ways.
        self.assertEqual([r["default"][:2] for r in res], [[i, 4] for i in range(4)])


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--worker":
    _worker(sys.argv[2], sys.argv[3])
elif __name__ == "__main__":
    unittest.main()
