"""The training loop (reference ``train.py: reconstruction``), with its schedule events as methods.

Per iteration: draw a ray batch, render it, photometric MSE plus regularisers, one Adam step,
learning-rate decay. Between steps, at the iterations the schedule names: rebuild the alpha
grid (the first time also shrinking the box, the second also filtering training rays),
upsample the grids (and restart Adam), render a few test views, free Jittor's memory.
"""
from __future__ import annotations

import datetime
import os
import resource
import statistics
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import jittor as jt
from tqdm.auto import tqdm

from tensorf_jt import kernels
from tensorf_jt.checkpoint import load_checkpoint, save_checkpoint
from tensorf_jt.dataLoader import RayBatchDataset, load_split, prepare_dataset
from tensorf_jt.errors import ConfigError
from tensorf_jt.evaluation import evaluate, evaluate_path
from tensorf_jt.losses import mse_to_psnr
from tensorf_jt.models import MODELS, TensorBase
from tensorf_jt.profiling import stage
from tensorf_jt.schedules import N_to_reso, TrainingSchedule, cal_n_samples, lr_decay_factor
from tensorf_jt.training_log import TrainingLog


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and Jittor. Pending lazy random Vars would consume Jittor's stream
    after seeding, so everything queued is executed first."""
    jt.sync_all()
    jt.set_global_seed(seed)


def free_memory() -> None:
    """Drop Jittor's recorded graph and cached allocations (the ``--gc_every`` cleanup)."""
    jt.clean_graph()
    jt.sync_all()
    jt.gc()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def make_optimizer(model: TensorBase, lr_grid: float, lr_network: float) -> jt.optim.Adam:
    """Adam with the reference's betas; Jittor's Adam needs a default lr even with per-group lrs.
    Groups without parameters (the SH and RGB shaders have none) are left out."""
    groups = [group for group in model.get_optparam_groups(lr_grid, lr_network) if list(group["params"])]
    return jt.optim.Adam(groups, lr=lr_grid, betas=(0.9, 0.99))


@dataclass
class TrainResult:
    logfolder: str
    checkpoint: str
    iterations: int
    wall_time_s: float
    seconds_per_iter_median: float
    peak_rss_mb: float
    final_train_psnr: float
    test_metrics: dict | None = None
    events: list = field(default_factory=list)


class Trainer:
    """Owns the model, optimizer, data and schedule of one run; ``run()`` trains it."""

    def __init__(self, args) -> None:
        self.args = args
        self._check_args()
        kernels.set_kernels(args.kernels)
        seed_everything(args.seed)
        prepare_dataset(args)
        self.train_dataset = load_split(args, "train", is_stack=False)
        self.test_dataset = load_split(args, "test", is_stack=True)
        self.white_bg = self.train_dataset.white_bg or args.white_bkgd
        self.ndc_ray = bool(args.ndc_ray)
        self.logfolder = self._make_logfolder()

        aabb = self.train_dataset.scene_bbox
        self.reso_cur = N_to_reso(args.N_voxel_init, aabb)
        self.reso_mask = self.reso_cur
        self.nSamples = min(args.nSamples, cal_n_samples(self.reso_cur, args.step_ratio))
        self.model = self._build_model(aabb)
        self.model.jitter_samples = args.perturb > 0

        self.schedule = TrainingSchedule.from_args(args)
        decay_iters = args.lr_decay_iters if args.lr_decay_iters > 0 else args.n_iters
        self.lr_factor = lr_decay_factor(args.lr_decay_target_ratio, decay_iters)
        self.optimizer = make_optimizer(self.model, args.lr_init, args.lr_basis)

        self.L1_reg_weight = args.L1_weight_inital
        self.TV_weight_density, self.TV_weight_app = args.TV_weight_density, args.TV_weight_app
        rays, rgbs = self.train_dataset.all_rays, self.train_dataset.all_rgbs
        if not args.ndc_ray:  # NDC rays all cross the NDC box; the reference filters neither
            rays, rgbs = self.model.filtering_rays(rays, rgbs, bbox_only=True)
        self._set_training_rays(rays, rgbs)
        self.events: list[tuple[int, str]] = []

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

    def _make_logfolder(self) -> str:
        args = self.args
        stamp = datetime.datetime.now().strftime("-%Y%m%d-%H%M%S") if args.add_timestamp else ""
        folder = os.path.join(args.basedir, f"{args.expname}{stamp}")
        try:
            os.makedirs(os.path.join(folder, "imgs_vis"), exist_ok=True)
        except OSError as err:
            raise ConfigError(f"Cannot create the log folder '{folder}' ({err.strerror}); "
                              "choose a writable --basedir.") from None
        return folder

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

    def _set_training_rays(self, rays: np.ndarray, rgbs: np.ndarray) -> None:
        self.ray_batches = RayBatchDataset(rays, rgbs, self.args.batch_size, seed=self.args.seed)
        self._batch_iter = iter(self.ray_batches)

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
                                N_samples=self.nSamples)
        mse = jt.sqr(rgb_map - rgbs).mean()
        with stage("backward"):
            self.optimizer.zero_grad()
            self.optimizer.backward(mse + self.regularisation())
        with stage("optimizer"):
            self.optimizer.step()
            for group in self.optimizer.param_groups:
                group["lr"] = group["lr"] * self.lr_factor
        return float(mse.item())

    # ------------------------------------------------------------------ events
    def update_alpha_mask(self, iteration: int) -> None:
        with jt.no_grad():
            if int(np.prod(self.reso_cur)) < 256 ** 3:
                self.reso_mask = self.reso_cur
            new_aabb = self.model.updateAlphaMask(tuple(self.reso_mask))
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
            if self.schedule.filters_rays(iteration) and not self.ndc_ray:
                rays, rgbs = self.model.filtering_rays(self.ray_batches.rays, self.ray_batches.rgbs)
                self._set_training_rays(rays, rgbs)
                self.events.append((iteration, f"ray filtering kept {rays.shape[0]} rays"))

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
        lr_scale = 1.0 if args.lr_upsample_reset else args.lr_decay_target_ratio ** (iteration / args.n_iters)
        self.optimizer = make_optimizer(self.model, args.lr_init * lr_scale, args.lr_basis * lr_scale)
        self.events.append((iteration, f"upsample to {self.reso_cur}"))

    def visualize(self, iteration: int) -> float:
        summary = evaluate(self.test_dataset, self.model, os.path.join(self.logfolder, "imgs_vis"),
                           N_vis=self.args.N_vis, prefix=f"{iteration:06d}_", N_samples=self.nSamples,
                           white_bg=self.white_bg, compute_extra_metrics=False, chunk=self.args.chunk_size,
                           show_progress=False, ndc_ray=self.ndc_ray)
        return summary.get("psnr", 0.0)

    # -------------------------------------------------------------------- run
    def run(self) -> TrainResult:
        args = self.args
        started = time.time()
        train_log = TrainingLog(self.logfolder)
        step_times, recent_psnrs, test_psnr, last_psnr, logged_events = [], [], 0.0, 0.0, 0
        progress = tqdm(range(args.n_iters), miniters=args.progress_refresh_rate, file=sys.stdout,
                        dynamic_ncols=True)
        for iteration in progress:
            tick = time.time()
            mse = self.train_step()
            step_times.append(time.time() - tick)
            last_psnr = mse_to_psnr(mse)
            recent_psnrs.append(last_psnr)
            if iteration % args.progress_refresh_rate == 0:
                window_psnr = float(np.mean(recent_psnrs))
                progress.set_description(
                    f"Iteration {iteration:05d}: train_psnr = {window_psnr:.2f} "
                    f"test_psnr = {test_psnr:.2f} mse = {mse:.6f}")
                train_log.row(self, iteration, mse=mse, train_psnr=window_psnr)
                recent_psnrs = []
            if args.N_vis != 0 and iteration % args.vis_every == args.vis_every - 1:
                test_psnr = self.visualize(iteration)
                train_log.row(self, iteration, test_psnr=test_psnr, event="test views rendered (imgs_vis)")
            if self.schedule.updates_alpha_mask(iteration):
                self.update_alpha_mask(iteration)
            if self.schedule.upsamples(iteration):
                self.upsample(iteration)
            for event_iteration, text in self.events[logged_events:]:
                progress.write(f"[{event_iteration}] {text}")
                train_log.row(self, event_iteration, event=text)
            logged_events = len(self.events)
            if args.gc_every > 0 and (iteration + 1) % args.gc_every == 0:
                free_memory()
        progress.close()

        checkpoint = save_checkpoint(self.model, os.path.join(self.logfolder, f"{args.expname}.th"),
                                     train_args=vars(args))
        wall_time = time.time() - started
        result = TrainResult(
            logfolder=self.logfolder, checkpoint=checkpoint, iterations=args.n_iters, wall_time_s=wall_time,
            seconds_per_iter_median=statistics.median(step_times[len(step_times) // 10:] or step_times),
            peak_rss_mb=peak_rss_mb(), final_train_psnr=last_psnr, events=list(self.events))
        if args.render_train:
            train_views = load_split(args, "train", is_stack=True)
            evaluate(train_views, self.model, os.path.join(self.logfolder, "imgs_train_all"),
                     white_bg=self.white_bg, chunk=args.chunk_size, ndc_ray=self.ndc_ray)
        if args.render_test:
            result.test_metrics = evaluate(self.test_dataset, self.model, os.path.join(self.logfolder, "imgs_test_all"),
                                           white_bg=self.white_bg, chunk=args.chunk_size, ndc_ray=self.ndc_ray)
            train_log.row(self, args.n_iters - 1, test_psnr=result.test_metrics["psnr"], event="test split rendered")
        if args.render_path:
            evaluate_path(self.test_dataset, self.model, os.path.join(self.logfolder, "imgs_path_all"),
                          white_bg=self.white_bg, ndc_ray=self.ndc_ray, chunk=args.chunk_size)
        train_log.close()
        return result


def train(args) -> TrainResult:
    return Trainer(args).run()
