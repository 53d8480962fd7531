"""The training loop (reference ``train.py: reconstruction``), with its schedule events as methods.

Per iteration: draw a ray batch, render it, photometric MSE plus regularisers, one Adam step,
learning-rate decay. Between steps, at the iterations the schedule names: rebuild the alpha
grid (the first time also shrinking the box, the second also filtering training rays),
upsample the grids (and restart Adam), render a few test views, free Jittor's memory.

Every ``--save_every`` iterations and at the end the whole training state is written to
``expname_state.th`` (``tensorf_jt.resume``), from which ``--resume`` continues the run
exactly. SIGINT and SIGTERM stop the loop after the current step and save that state. A
non-finite loss sends training back to the last good in-memory snapshot with halved learning
rates; the third time in a row it stops with ``TrainingDiverged``.
"""
from __future__ import annotations

import datetime
import math
import os
import signal
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import jittor as jt
from tqdm.auto import tqdm

from tensorf_jt import distributed, kernels
from tensorf_jt.checkpoint import (checkpoint_dict, load_checkpoint, model_from_checkpoint, save_atomically,
                                   save_checkpoint)
from tensorf_jt.dataLoader import RayBatchDataset, load_split, prepare_dataset
from tensorf_jt.errors import CheckpointError, ConfigError
from tensorf_jt.evaluation import evaluate, evaluate_path
from tensorf_jt.guards import (MAX_NONFINITE_IN_A_ROW, SNAPSHOT_EVERY_WITHOUT_SAVES, TrainingDiverged,
                               explain_jittor_error, nonfinite_parameters, stop_requests)
from tensorf_jt.losses import mse_to_psnr
from tensorf_jt.memory import CacheTrim, free_memory, peak_rss_mb
from tensorf_jt.models import MODELS, TensorBase
from tensorf_jt.models.tensor_base import kept_ray_ids
from tensorf_jt.optimizer import TorchAdam
from tensorf_jt.profiling import stage
from tensorf_jt.resume import (STATE_FORMAT, find_latest_state, load_optimizer_state, optimizer_state,
                               pack_ray_mask, read_state, resume_args, state_path, unpack_ray_mask)
from tensorf_jt.schedules import N_to_reso, TrainingSchedule, cal_n_samples, lr_decay_factor
from tensorf_jt.training_log import TrainingLog

def seed_everything(seed: int) -> None:
    """Seed Python, numpy and Jittor. Pending lazy random Vars would consume Jittor's stream
    after seeding, so everything queued is executed first."""
    jt.sync_all()
    jt.set_global_seed(seed)


def seed_iteration(seed: int, iteration: int) -> None:
    """Reseed Jittor and numpy's global generator from (seed, iteration) before a training step.

    Jittor's generator state cannot be read back, so a resumed run could not continue its
    stream; seeded per iteration, the training jitter and background draws depend on the
    iteration alone. Mixed through SeedSequence because Jittor's CPU generator turns nearby
    seeds into nearby first numbers.
    """
    mixed = int(np.random.SeedSequence([seed, iteration]).generate_state(1)[0])
    jt.set_seed(mixed % (2 ** 31 - 1))
    np.random.seed(mixed)


def make_optimizer(model: TensorBase, lr_grid: float, lr_network: float) -> TorchAdam:
    """Adam with the reference's betas, stepping as torch's does (per-parameter step counts, no
    step without a gradient: ``tensorf_jt.optimizer``); Jittor's optimizers need a default lr
    even with per-group lrs. Groups without parameters (the SH and RGB shaders have none) are
    left out."""
    groups = [group for group in model.get_optparam_groups(lr_grid, lr_network) if list(group["params"])]
    return TorchAdam(groups, lr=lr_grid, betas=(0.9, 0.99))


@dataclass
class TrainResult:
    """``iterations``: completed; ``stopped_by_signal``: the signal that stopped the run early, if any."""

    logfolder: str
    checkpoint: str
    state: str
    iterations: int
    wall_time_s: float
    seconds_per_iter_median: float
    peak_rss_mb: float
    final_train_psnr: float
    test_metrics: dict | None = None
    events: list = field(default_factory=list)
    stopped_by_signal: int | None = None


class Trainer:
    """Owns the model, optimizer, data and schedule of one run; ``run()`` trains it.

    ``state`` (a training-state dict, ``tensorf_jt.resume``) continues a saved run in
    ``logfolder`` instead of starting a new one.
    """

    def __init__(self, args, state: dict | None = None, logfolder: str | None = None) -> None:
        self.args = args
        self._check_args()
        distributed.check_launch(args.batch_size)
        self.main_rank = distributed.is_main()  # the rank that writes files and shows progress
        if not self.main_rank:
            warnings.simplefilter("ignore")  # one rank speaks for all
        kernels.set_kernels(args.kernels)
        seed_everything(args.seed)
        if self.main_rank:  # generates the demo scene on first use: one writer
            prepare_dataset(args)
        distributed.barrier()
        self.train_dataset = load_split(args, "train", is_stack=False)
        self.test_dataset = load_split(args, "test", is_stack=True)
        self.white_bg = self.train_dataset.white_bg or args.white_bkgd
        self.ndc_ray = bool(args.ndc_ray)
        self.logfolder = self._make_logfolder(logfolder)
        self.state_path = state_path(self.logfolder, args.expname)
        self.schedule = TrainingSchedule.from_args(args)
        decay_iters = args.lr_decay_iters if args.lr_decay_iters > 0 else args.n_iters
        self.lr_factor = lr_decay_factor(args.lr_decay_target_ratio, decay_iters)

        self.iteration = 0  # iterations completed: the next one to run
        self.events: list[tuple[int, str]] = []
        self.recent_psnrs: list[float] = []  # train PSNRs since the last progress row
        self.test_psnr, self.last_psnr = 0.0, 0.0
        self.stop_signal: int | None = None  # SIGINT / SIGTERM received (by any rank, once agreed)
        self.stop_agreed = False  # every rank knows the run stops: the loop's only stop test
        self.ray_batches: RayBatchDataset | None = None
        self.ray_keep: np.ndarray | None = None  # which of the dataset's training rays are trained on
        self.lr_scale = 1.0  # learning rates relative to the schedule's; the NaN guard halves it
        self._logged_events = 0
        self._log_rows: list[dict] = []
        self._elapsed_before = 0.0  # training time spent before this process (resumed runs)
        self._snapshot: dict | None = None
        self._failures, self._failed_at = 0, -1
        if state is None:
            self._start_new_run()
        else:
            self._resume(state)

    # ------------------------------------------------------------------- setup
    def _check_args(self) -> None:
        args = self.args
        if args.model_name not in MODELS:
            raise ConfigError(f"model_name '{args.model_name}' is not supported; choose one of {', '.join(MODELS)}.")
        if not args.expname:
            raise ConfigError("expname is not set: give --expname NAME or an 'expname = NAME' line in the config.")
        if args.ckpt is None and (not args.n_lamb_sigma or not args.n_lamb_sh):
            raise ConfigError("n_lamb_sigma and n_lamb_sh must be set, e.g. 'n_lamb_sigma = [16,16,16]' "
                              "and 'n_lamb_sh = [48,48,48]' as in configs/lego.txt.")

    def _make_logfolder(self, folder: str | None) -> str:
        args = self.args
        if folder is None:
            stamp = datetime.datetime.now().strftime("-%Y%m%d-%H%M%S") if args.add_timestamp else ""
            folder = os.path.join(args.basedir, f"{args.expname}{stamp}")
        try:
            if self.main_rank:
                os.makedirs(os.path.join(folder, "imgs_vis"), exist_ok=True)
        except OSError as err:
            raise ConfigError(f"Cannot create the log folder '{folder}' ({err.strerror}); "
                              "choose a writable --basedir.") from None
        return folder

    def _start_new_run(self) -> None:
        args = self.args
        aabb = self.train_dataset.scene_bbox
        self.reso_cur = N_to_reso(args.N_voxel_init, aabb)
        self.reso_mask = self.reso_cur
        self.nSamples = min(args.nSamples, cal_n_samples(self.reso_cur, args.step_ratio))
        self.model = self._build_model(aabb)
        self.model.jitter_samples = args.perturb > 0
        self._synchronise_model()
        self.optimizer = make_optimizer(self.model, args.lr_init, args.lr_basis)
        self.L1_reg_weight = args.L1_weight_inital
        self.TV_weight_density, self.TV_weight_app = args.TV_weight_density, args.TV_weight_app
        if args.ndc_ray:  # NDC rays all cross the NDC box; the reference filters neither
            self._set_training_rays(None)
        else:
            self._filter_training_rays(bbox_only=True)

    def _build_model(self, aabb: np.ndarray) -> TensorBase:
        args = self.args
        if args.ckpt is not None:
            model, _ = load_checkpoint(args.ckpt, args.model_name)
            return model
        return MODELS[args.model_name](
            aabb, self.reso_cur, density_n_comp=args.n_lamb_sigma, appearance_n_comp=args.n_lamb_sh,
            app_dim=args.data_dim_color, near_far=self.train_dataset.near_far, shadingMode=args.shadingMode,
            alphaMask_thres=args.alpha_mask_thre, density_shift=args.density_shift,
            distance_scale=args.distance_scale, rayMarch_weight_thres=args.rm_weight_mask_thre,
            pos_pe=args.pos_pe, view_pe=args.view_pe, fea_pe=args.fea_pe, featureC=args.featureC,
            step_ratio=args.step_ratio, fea2denseAct=args.fea2denseAct)

    def _set_training_rays(self, keep: np.ndarray | None) -> None:
        """Train on the dataset's rays where ``keep`` is true (all for None), with a fresh sampler."""
        self.ray_keep = keep
        rows = None if keep is None else np.flatnonzero(keep)
        self.ray_batches = RayBatchDataset(self.train_dataset, self.args.batch_size, seed=self.args.seed, rows=rows,
                                           part=(distributed.rank(), distributed.world_size()))
        self._batch_iter = iter(self.ray_batches)

    def _filter_training_rays(self, bbox_only: bool) -> int:
        """Drop the training rays the model says cannot see anything; returns how many are left.

        The result is kept as a mask over the dataset's rays, which a state file stores in one
        bit per ray; the rays themselves are made a chunk at a time from the dataset's views.
        Under MPI each rank tests its part of the rays and every rank receives the whole mask.
        """
        rows = None if self.ray_batches is None else self.ray_batches.rows
        candidates = self.train_dataset.n_rays if rows is None else len(rows)
        share = distributed.share_of(candidates)
        hit = self.model.ray_hit_mask(self.train_dataset, share if rows is None else rows[share], bbox_only=bbox_only)
        kept = kept_ray_ids(distributed.gather_mask(hit, candidates), rows)
        keep = np.zeros(self.train_dataset.n_rays, dtype=bool)
        keep[kept] = True
        self._set_training_rays(keep)
        return len(kept)

    # ------------------------------------------------------- state and resume
    def _capture(self) -> dict:
        """Copies of everything the loop needs to continue from here (model, Adam, schedule, rays, sampler)."""
        snapshot = {
            "iteration": self.iteration,
            "model": checkpoint_dict(self.model),
            "optimizer": optimizer_state(self.optimizer),
            "schedule": {"reso_cur": list(self.reso_cur), "reso_mask": list(self.reso_mask),
                         "nSamples": int(self.nSamples), "L1_reg_weight": self.L1_reg_weight,
                         "TV_weight_density": self.TV_weight_density, "TV_weight_app": self.TV_weight_app,
                         "lr_scale": self.lr_scale},
            "ray_keep": self.ray_keep,
            "sampler": self.ray_batches.state(),
        }
        optimizer = snapshot["optimizer"]["groups"]
        jt.sync(list(snapshot["model"]["state_dict"].values())
                + [var for group in optimizer for key in ("m", "values") for var in group[key]])
        return snapshot

    def _restore(self, snapshot: dict) -> None:
        """Go back to a ``_capture`` result (or a state file's equivalent)."""
        args = self.args
        self.model = model_from_checkpoint(snapshot["model"], source="The training state")
        self.model.jitter_samples = args.perturb > 0
        self._synchronise_model()
        schedule = snapshot["schedule"]
        self.reso_cur, self.reso_mask = list(schedule["reso_cur"]), list(schedule["reso_mask"])
        self.nSamples = int(schedule["nSamples"])
        self.L1_reg_weight = schedule["L1_reg_weight"]
        self.TV_weight_density, self.TV_weight_app = schedule["TV_weight_density"], schedule["TV_weight_app"]
        self.lr_scale = schedule["lr_scale"]
        self.optimizer = make_optimizer(self.model, args.lr_init, args.lr_basis)
        load_optimizer_state(self.optimizer, snapshot["optimizer"])
        if self.ray_batches is None or snapshot["ray_keep"] is not self.ray_keep:
            self._set_training_rays(snapshot["ray_keep"])
        self.ray_batches.restore(snapshot["sampler"])
        self.iteration = int(snapshot["iteration"])

    def _state_file(self, snapshot: dict) -> dict:
        """A snapshot plus what a new process needs besides it: flags, ray mask, training log."""
        state = {key: value for key, value in snapshot.items() if key != "ray_keep"}
        state.update(format=STATE_FORMAT, train_args=dict(vars(self.args)),
                     rays=pack_ray_mask(snapshot["ray_keep"], self.train_dataset.n_rays))
        state["log"] = {
            "rows": list(self.train_log.rows), "elapsed_s": time.time() - self._started,
            "events": list(self.events), "logged_events": self._logged_events,
            "recent_psnrs": list(self.recent_psnrs), "test_psnr": self.test_psnr, "last_psnr": self.last_psnr,
        }
        return state

    def _resume(self, state: dict) -> None:
        snapshot = dict(state, ray_keep=unpack_ray_mask(state["rays"], self.train_dataset.n_rays))
        self._restore(snapshot)
        log = state["log"]
        self._log_rows, self._elapsed_before = log["rows"], log["elapsed_s"]
        self.events, self._logged_events = [tuple(event) for event in log["events"]], log["logged_events"]
        self.recent_psnrs, self.test_psnr, self.last_psnr = list(log["recent_psnrs"]), log["test_psnr"], log["last_psnr"]

    def _checkpoint(self, save: bool) -> bool:
        """Take the NaN guard's snapshot and, if ``save``, write it to the state file.

        Returns False instead when a parameter is no longer finite; training has then gone back
        to the previous snapshot (there must be one: the starting model must be finite).
        """
        bad = nonfinite_parameters(self.model)
        if bad and self._snapshot is None:
            raise CheckpointError(f"The model to train starts with non-finite values in {', '.join(bad[:3])}: "
                                  "the --ckpt or --resume file is damaged.")
        if bad:
            self._recover(self.iteration - 1, f"parameters {', '.join(bad[:3])} are not finite")
            return False
        self._snapshot = self._capture()
        if save and self.main_rank:
            save_atomically(self._state_file(self._snapshot), self.state_path)
        return True

    def _recover(self, iteration: int, what: str) -> None:
        """Go back to the last snapshot with halved learning rates, or give up after too many tries."""
        args = self.args
        self._failures += 1
        back_to = self._snapshot["iteration"]
        if self._failures >= MAX_NONFINITE_IN_A_ROW:
            raise TrainingDiverged(
                f"Training diverged: {what} at iteration {iteration}, {self._failures} times in a row, although "
                f"training went back to iteration {back_to} with halved learning rates each time. Start again "
                f"with a lower --lr_init (now {args.lr_init}) or --lr_basis (now {args.lr_basis}), or a larger "
                f"--batch_size (now {args.batch_size}); check the dataset if it happens early.")
        self._failed_at = max(self._failed_at, iteration)
        lr_scale = self.lr_scale * 0.5
        self._restore(self._snapshot)
        for group in self.optimizer.param_groups:
            group["lr"] = group["lr"] * lr_scale / self.lr_scale
        self.lr_scale = lr_scale
        text = f"{what} at iteration {iteration}: back to iteration {back_to}, learning rates x{lr_scale:g}"
        warnings.warn(f"{text}. Training goes on; if this repeats, lower --lr_init or raise --batch_size.")
        self.events.append((iteration, f"non-finite: {text}"))

    # ------------------------------------------------------------------ a step
    def regularisation(self) -> jt.Var | float:
        """Weighted regularisers of this iteration; TV weights decay with the learning rate."""
        total = 0.0
        if self.args.Ortho_weight > 0:
            total = total + self.args.Ortho_weight * self.model.vector_comp_diffs()
        if self.L1_reg_weight > 0:
            total = total + self.L1_reg_weight * self.model.density_L1()
        if self.TV_weight_density > 0:
            self.TV_weight_density *= self.lr_factor
            total = total + self.model.TV_loss_density() * self.TV_weight_density
        if self.TV_weight_app > 0:
            self.TV_weight_app *= self.lr_factor
            total = total + self.model.TV_loss_app() * self.TV_weight_app
        return total

    def train_step(self) -> float:
        """One optimisation step on the next ray batch; returns the batch's photometric MSE."""
        with stage("batch"):
            rays, rgbs = next(self._batch_iter)
        rgb_map, _ = self.model(rays, white_bg=self.white_bg, is_train=True, ndc_ray=self.ndc_ray,
                                N_samples=self.nSamples, jitter=self._batch_jitter())
        mse = jt.sqr(rgb_map - rgbs).mean()
        with stage("backward"):
            self.optimizer.zero_grad()
            self.optimizer.backward(mse + self.regularisation())
        with stage("optimizer"):
            self.optimizer.step()
            for group in self.optimizer.param_groups:
                group["lr"] = group["lr"] * self.lr_factor
        # The whole step runs here, in one graph: without this, the update would wait for
        # whatever next needs the parameters, and the step's time would land elsewhere.
        jt.sync_all()
        return float(mse.item())

    def _batch_jitter(self) -> jt.Var | None:
        """This rank's share of the batch's per-ray sample jitter, drawn for the whole batch so that
        the shares are the numbers one process would draw; None (the model draws) without MPI."""
        if distributed.world_size() == 1 or not self.model.jitter_samples or self.ndc_ray:
            return None
        return jt.rand(self.ray_batches.rays_per_batch)[self.ray_batches.share]

    def _synchronise_model(self) -> None:
        """Give every rank rank 0's parameters and alpha grid after the model is built, restored or
        changed by a grid event. The ranks compute the same numbers anyway; this keeps them equal
        even where a computation's floating-point order is not fixed (atomic adds on GPUs)."""
        if distributed.world_size() == 1:
            return
        variables = list(self.model.state_dict().values())
        if self.model.alphaMask is not None:
            variables.append(self.model.alphaMask.alpha_volume)
        distributed.broadcast(variables)

    # ------------------------------------------------------------------ events
    def update_alpha_mask(self, iteration: int) -> None:
        with jt.no_grad():
            if int(np.prod(self.reso_cur)) < 256 ** 3:
                self.reso_mask = self.reso_cur
            new_aabb = distributed.broadcast_optional(self.model.updateAlphaMask(tuple(self.reso_mask)),
                                                      shape=(2, 3), dtype=np.float32)  # rank 0's box for all
            if new_aabb is not None:
                occupied = 100 * self.model.alphaMask.occupied_fraction()
                self.events.append((iteration, f"alpha mask {list(self.reso_mask)}, {occupied:.1f}% occupied"))
            if self.schedule.shrinks(iteration):
                if new_aabb is not None and not self.model.can_shrink:
                    self.events.append((iteration, f"{type(self.model).__name__} keeps its box (no shrink)"))
                elif new_aabb is not None:
                    self.model.shrink(new_aabb)
                    self._restart_optimizer_keeping_lr()
                    self.events.append((iteration, f"shrink to grid {self.model.gridSize}"))
                self.L1_reg_weight = self.args.L1_weight_rest
        self._synchronise_model()
        if self.schedule.filters_rays(iteration) and not self.ndc_ray:
            with jt.no_grad():
                kept = self._filter_training_rays(bbox_only=False)
            self.events.append((iteration, f"ray filtering kept {kept} rays"))

    def _restart_optimizer_keeping_lr(self) -> None:
        """New Adam over the model's current tensors at the current learning rates.

        Shrinking replaces every plane and line; an optimizer still holding the old ones would
        leave the new ones untrained until the next upsample (the reference does exactly that
        when a shrink does not coincide with an upsample, as it does for lego).
        """
        groups = self.optimizer.param_groups
        self.optimizer = make_optimizer(self.model, groups[0]["lr"], groups[-1]["lr"])

    def upsample(self, iteration: int) -> None:
        args = self.args
        self.reso_cur = N_to_reso(self.schedule.voxels_after_upsample(iteration), self.model.aabb)
        self.nSamples = min(args.nSamples, cal_n_samples(self.reso_cur, args.step_ratio))
        self.model.upsample_volume_grid(self.reso_cur)
        self._synchronise_model()
        lr_scale = 1.0 if args.lr_upsample_reset else args.lr_decay_target_ratio ** (iteration / args.n_iters)
        lr_scale *= self.lr_scale
        self.optimizer = make_optimizer(self.model, args.lr_init * lr_scale, args.lr_basis * lr_scale)
        self.events.append((iteration, f"upsample to {self.reso_cur}"))

    def visualize(self, iteration: int) -> float:
        if not self.main_rank:
            return self.test_psnr
        summary = evaluate(self.test_dataset, self.model, os.path.join(self.logfolder, "imgs_vis"),
                           N_vis=self.args.N_vis, prefix=f"{iteration:06d}_", N_samples=self.nSamples,
                           white_bg=self.white_bg, compute_extra_metrics=False, chunk=self.args.chunk_size,
                           show_progress=False, ndc_ray=self.ndc_ray)
        return summary.get("psnr", 0.0)

    # -------------------------------------------------------------------- run
    def _request_stop(self, signum: int) -> None:
        """SIGINT / SIGTERM: stop after the current step and save; a second one stops at once."""
        if self.stop_signal is not None:
            raise KeyboardInterrupt
        self.stop_signal = signum

    def _run_iteration(self, progress: tqdm) -> None:
        """Train iteration ``self.iteration`` and run the events scheduled after it."""
        args = self.args
        iteration = self.iteration
        seed_iteration(args.seed, iteration)
        tick = time.time()
        mse = self.train_step()
        self.step_times.append(time.time() - tick)
        self.cache_trim.check()
        # Every rank leaves this step with the mean loss over the ranks' shares (the whole
        # batch's) and with one decision on stopping, so that all take the same path below.
        mse, stop = distributed.mean_and_any(mse, self.stop_signal is not None)
        if stop:
            self.stop_agreed = True
            self.stop_signal = self.stop_signal or signal.SIGTERM  # another rank was asked to stop
        if not math.isfinite(mse):
            self._recover(iteration, f"the loss is {mse}")
            return
        self.last_psnr = mse_to_psnr(mse)
        self.recent_psnrs.append(self.last_psnr)
        if iteration % args.progress_refresh_rate == 0:
            window_psnr = float(np.mean(self.recent_psnrs))
            progress.set_description(
                f"Iteration {iteration:05d}: train_psnr = {window_psnr:.2f} "
                f"test_psnr = {self.test_psnr:.2f} mse = {mse:.6f}")
            self.train_log.row(self, iteration, mse=mse, train_psnr=window_psnr)
            self.recent_psnrs = []
        if args.N_vis != 0 and iteration % args.vis_every == args.vis_every - 1:
            self.test_psnr = self.visualize(iteration)
            self.train_log.row(self, iteration, test_psnr=self.test_psnr, event="test views rendered (imgs_vis)")
        if self.schedule.updates_alpha_mask(iteration):
            self.update_alpha_mask(iteration)
        if self.schedule.upsamples(iteration):
            self.upsample(iteration)
        for event_iteration, text in self.events[self._logged_events:]:
            if self.main_rank:
                progress.write(f"[{event_iteration}] {text}")
            self.train_log.row(self, event_iteration, event=text)
        self._logged_events = len(self.events)
        self.iteration += 1
        if self._failures and iteration >= self._failed_at:
            self._failures = 0
        snapshot_every = args.save_every or SNAPSHOT_EVERY_WITHOUT_SAVES
        if self.iteration % snapshot_every == 0 and self.iteration < args.n_iters:
            self._checkpoint(save=args.save_every > 0)
        if args.gc_every > 0 and self.iteration % args.gc_every == 0:
            free_memory()
            self.cache_trim.reset()

    def run(self) -> TrainResult:
        args = self.args
        self._started = time.time() - self._elapsed_before
        self.train_log = TrainingLog(self.logfolder, rows=self._log_rows, elapsed_s=self._elapsed_before,
                                     write=self.main_rank)
        self.step_times: list[float] = []
        self.cache_trim = CacheTrim(args.gc_growth)
        progress = tqdm(total=args.n_iters, initial=self.iteration, miniters=args.progress_refresh_rate,
                        file=sys.stdout, dynamic_ncols=True, disable=not self.main_rank)
        try:
            with stop_requests(self._request_stop):
                self._checkpoint(save=False)
                while True:
                    if self.iteration < args.n_iters and not self.stop_agreed:
                        self._run_iteration(progress)
                    elif self._checkpoint(save=True):  # finished or asked to stop: save, unless a tensor went bad
                        break
                    if progress.n + 1 == self.iteration:
                        progress.update(1)
                    elif progress.n != self.iteration:  # the NaN guard went back
                        progress.n = self.iteration
                        progress.refresh()
        except (RuntimeError, MemoryError) as err:
            explain_jittor_error(err, args, f"training (iteration {self.iteration})")
            raise
        progress.close()
        distributed.barrier()  # rank 0 has saved the state before any rank can leave
        if distributed.world_size() > 1:
            state = self.model.state_dict()
            distributed.check_ranks_agree(list(state.values()), list(state))
        checkpoint = os.path.join(self.logfolder, f"{args.expname}.th")
        if self.main_rank:
            save_checkpoint(self.model, checkpoint, train_args=vars(args))
        settled = self.step_times[len(self.step_times) // 10:]  # leave out the first steps' kernel compiles
        result = TrainResult(
            logfolder=self.logfolder, checkpoint=checkpoint, state=self.state_path, iterations=self.iteration,
            wall_time_s=time.time() - self._started,
            seconds_per_iter_median=statistics.median(settled) if settled else float("nan"),
            peak_rss_mb=peak_rss_mb(), final_train_psnr=self.last_psnr, events=list(self.events),
            stopped_by_signal=self.stop_signal)
        if self.stop_signal is None and self.main_rank:
            try:
                self._render_results(result)
            except (RuntimeError, MemoryError) as err:
                explain_jittor_error(err, args, "rendering after training")
                raise
        self.train_log.close()
        return result

    def _render_results(self, result: TrainResult) -> None:
        """The renders the flags ask for after training: training views, test views, camera path."""
        args = self.args
        if args.render_train:
            train_views = load_split(args, "train", is_stack=True)
            evaluate(train_views, self.model, os.path.join(self.logfolder, "imgs_train_all"),
                     white_bg=self.white_bg, chunk=args.chunk_size, ndc_ray=self.ndc_ray)
        if args.render_test:
            result.test_metrics = evaluate(self.test_dataset, self.model, os.path.join(self.logfolder, "imgs_test_all"),
                                           white_bg=self.white_bg, chunk=args.chunk_size, ndc_ray=self.ndc_ray)
            self.train_log.row(self, args.n_iters - 1, test_psnr=result.test_metrics["psnr"],
                               event="test split rendered")
        if args.render_path:
            evaluate_path(self.test_dataset, self.model, os.path.join(self.logfolder, "imgs_path_all"),
                          white_bg=self.white_bg, ndc_ray=self.ndc_ray, chunk=args.chunk_size)


def resume_path(args) -> str | None:
    """The state file ``--resume`` names; for ``auto`` the newest of this run (None: there is none yet)."""
    if args.resume != "auto":
        return args.resume
    if not args.expname:
        raise ConfigError("--resume auto looks for the run by its expname: give --config or --expname too.")
    return find_latest_state(args.basedir, args.expname)


def train(args, explicit: set[str] = frozenset()) -> TrainResult:
    """Train as ``args`` say; with ``--resume``, continue the saved run instead.

    ``explicit``: the flags set on the command line or in the config file (see
    ``config.parse_args_and_sources``); when resuming, the others come from the saved run.
    """
    if not args.resume:
        return Trainer(args).run()
    if args.ckpt:
        raise ConfigError("--ckpt starts a new run from a model, --resume continues a saved run: give only one.")
    path = resume_path(args)
    if path is None:
        print(f"--resume auto: no saved state of '{args.expname}' under '{args.basedir}' yet; starting a new run.")
        return Trainer(args).run()
    state = read_state(path)
    return Trainer(resume_args(args, set(explicit), state["train_args"]), state=state,
                   logfolder=os.path.dirname(os.path.abspath(path))).run()
