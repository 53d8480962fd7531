"""The training loop (reference ``train.py: reconstruction``): it orchestrates, the parts live elsewhere.

Per iteration: draw a ray batch, render it, photometric MSE plus regularisers, one Adam step,
learning-rate decay. Between steps, at the iterations the schedule names
(``training.schedules``), the grid events of ``training.events`` run: rebuild the alpha grid
(the first time also shrinking the box, the second also filtering the training rays with
``training.ray_filtering``), upsample the grids (and restart Adam). Test views are rendered
now and then (``evaluation``), Jittor's memory is freed (``runtime.memory``), rows go to the
training log (``training.log``).

Every ``save_every`` iterations and at the end the whole training state is written to
``expname_state.th`` (``training.state``), from which ``--resume`` continues the run exactly.
SIGINT and SIGTERM stop the loop after the current step and save that state. A non-finite
loss sends training back to the last good in-memory snapshot with halved learning rates
(``training.nan_guard``).
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

from tensorf_jt.config import RunConfig, require_for_training, resumed
from tensorf_jt.dataLoader import RayBatchDataset, load_split, prepare_dataset
from tensorf_jt.dataLoader.scene_fit import scene_summary
from tensorf_jt.dataLoader.scene_mode import adopt_foreground_box, check_box_in_view, mode_summary, scene_mode
from tensorf_jt.errors import CheckpointError, ConfigError
from tensorf_jt.evaluation.metrics import mse_to_psnr
from tensorf_jt.evaluation.renders import evaluate, evaluate_path
from tensorf_jt.formats.checkpoint import load_checkpoint, model_from_checkpoint, save_atomically, save_checkpoint
from tensorf_jt.models import MODELS, TensorBase
from tensorf_jt.rendering.contraction import MODEL_BOX
from tensorf_jt.runtime import distributed
from tensorf_jt.runtime.error_hints import explain_jittor_error
from tensorf_jt.runtime.memory import CacheTrim, free_memory, peak_rss_mb
from tensorf_jt.runtime.profiling import stage
from tensorf_jt.runtime.seeding import seed_everything, seed_iteration
from tensorf_jt.runtime.signals import stop_requests
from tensorf_jt.training import events
from tensorf_jt.training.log import TrainingLog
from tensorf_jt.training.tensorboard import TensorBoardLog
from tensorf_jt.training.losses import regularisation
from tensorf_jt.training.nan_guard import SNAPSHOT_EVERY_WITHOUT_SAVES, NanGuard, nonfinite_parameters
from tensorf_jt.training.optimizer import make_optimizer
from tensorf_jt.training.ray_filtering import filter_training_rays, ray_batches
from tensorf_jt.training.schedules import N_to_reso, ScheduleState, TrainingSchedule, lr_decay_factor
from tensorf_jt.training.state import (find_latest_state, load_optimizer_state, read_state,
                                       snapshot, state_contents, state_path, unpack_ray_mask)


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

    ``state`` (a training-state dict, ``training.state``) continues a saved run in
    ``logfolder`` instead of starting a new one.
    """

    def __init__(self, config: RunConfig, state: dict | None = None, logfolder: str | None = None) -> None:
        require_for_training(config)
        self.config = config
        distributed.check_launch(config.schedule.batch_size)
        self.main_rank = distributed.is_main()  # the rank that writes files and shows progress
        if not self.main_rank:
            warnings.simplefilter("ignore")  # one rank speaks for all
        seed_everything(config.schedule.seed)
        if self.main_rank:  # generates the demo scene on first use: one writer
            prepare_dataset(config.data)
        distributed.barrier()
        self.train_dataset = load_split(config.data, "train", is_stack=False)
        self.test_dataset = load_split(config.data, "test", is_stack=True)
        self.unbounded, mode_source = scene_mode(config.data, self.train_dataset)
        if self.unbounded:
            adopt_foreground_box(self.train_dataset)
            adopt_foreground_box(self.test_dataset)
        if self.unbounded and state is None and config.model.ckpt is None:
            check_box_in_view(self.train_dataset)
        if self.main_rank:
            print(f"{scene_summary(self.train_dataset)}; {mode_summary(self.unbounded, mode_source)}", flush=True)
        self.white_bg = self.train_dataset.white_bg or config.data.white_bkgd
        self.ndc_ray = config.data.ndc_ray
        self.logfolder = self._make_logfolder(logfolder)
        self.state_path = state_path(self.logfolder, config.output.expname)
        self.schedule = TrainingSchedule.from_config(config.schedule)
        self.lr_factor = lr_decay_factor(config.schedule.lr_decay_target_ratio, config.schedule.decay_iters)

        self.iteration = 0  # iterations completed: the next one to run
        self.events: list[tuple[int, str]] = []
        self.recent_psnrs: list[float] = []  # train PSNRs since the last progress row
        self.test_psnr, self.last_psnr = 0.0, 0.0
        self.stop_signal: int | None = None  # SIGINT / SIGTERM received (by any rank, once agreed)
        self.stop_agreed = False  # every rank knows the run stops: the loop's only stop test
        self.ray_batches: RayBatchDataset | None = None
        self.ray_keep: np.ndarray | None = None  # which of the dataset's training rays are trained on
        self.nan_guard = NanGuard()
        self.tensorboard_on = self.main_rank and config.output.tensorboard
        self.step_terms: dict[str, jt.Var] = {}  # the last step's regularisers (computed), for TensorBoard
        self._logged_events = 0
        self._viewer_events = 0  # grid events the viewer's boxes reflect
        self.viewer = None  # the browser viewer (rank 0, --viewer 1), started by run()
        log_rows, elapsed_before = [], 0.0  # a resumed run's log and training time so far
        if state is None:
            self._start_new_run()
        else:
            log_rows, elapsed_before = self._resume(state)
        self._open_run_records(log_rows, elapsed_before)

    def _open_run_records(self, log_rows: list[dict], elapsed_before: float) -> None:
        """What the run writes and times as it goes: training log, TensorBoard file, step times,
        the allocator-cache check, and the clock (``run`` restarts it, keeping ``elapsed_before``)."""
        self._elapsed_before = elapsed_before
        self._started = time.time() - elapsed_before
        self.train_log = TrainingLog(self.logfolder, rows=log_rows, elapsed_s=elapsed_before, write=self.main_rank)
        self.tensorboard = TensorBoardLog(self.logfolder, enabled=self.tensorboard_on)
        self.step_times: list[float] = []
        self.cache_trim = CacheTrim(self.config.runtime.gc_growth)

    # ------------------------------------------------------------------- setup
    def _make_logfolder(self, folder: str | None) -> str:
        output = self.config.output
        if folder is None:
            folder = output.run_folder(datetime.datetime.now().strftime("-%Y%m%d-%H%M%S") if output.add_timestamp else "")
        try:
            if self.main_rank:
                os.makedirs(os.path.join(folder, "imgs_vis"), exist_ok=True)
        except OSError as err:
            raise ConfigError(f"Cannot create the log folder '{folder}' ({err.strerror}); "
                              "choose a writable --basedir.") from None
        return folder

    def _start_new_run(self) -> None:
        schedule = self.config.schedule
        aabb = MODEL_BOX if self.unbounded else self.train_dataset.scene_bbox
        reso = N_to_reso(schedule.N_voxel_init, aabb)
        self.schedule_state = ScheduleState(reso_cur=reso, reso_mask=reso, nSamples=events.samples_per_ray(reso, self.config.model),
                                  L1_reg_weight=schedule.L1_weight_inital, TV_weight_density=schedule.TV_weight_density,
                                  TV_weight_app=schedule.TV_weight_app)
        self._adopt_model(self._build_model(aabb))
        if self.model.unbounded:
            self.schedule_state.nSamples = self.model.nSamples
        self.optimizer = make_optimizer(self.model, schedule.lr_init, schedule.lr_basis)
        if self.ndc_ray:  # NDC rays all cross the NDC box; the reference filters neither
            self._set_training_rays(None)
        else:
            self._set_training_rays(filter_training_rays(self.model, self.train_dataset, None, bbox_only=True))

    def _build_model(self, aabb: np.ndarray) -> TensorBase:
        """The model to train: ``--ckpt``'s, or a new one over ``aabb`` (model space)."""
        settings = self.config.model
        if settings.ckpt is not None:
            model, _ = load_checkpoint(settings.ckpt, settings.model_name)
            if model.unbounded != self.unbounded:
                raise ConfigError(f"--ckpt '{settings.ckpt}' holds {'an unbounded' if model.unbounded else 'a bounded'} "
                                  f"model, but this run's scene is {'unbounded' if self.unbounded else 'bounded'}: "
                                  f"set --unbounded {int(model.unbounded)} to go on training it.")
            if model.n_views and model.n_views != self.train_dataset.n_views:
                raise ConfigError(f"--ckpt '{settings.ckpt}' learned corrections for {model.n_views} training views, "
                                  f"but this dataset has {self.train_dataset.n_views}: train it on the views it "
                                  "was trained on.")
            return model
        contraction = {}
        if self.unbounded:
            contraction = {"scene_contraction": settings.contraction, "foreground_aabb": self.train_dataset.scene_bbox}
        return MODELS[settings.model_name](
            aabb, self.schedule_state.reso_cur, density_n_comp=list(settings.n_lamb_sigma),
            appearance_n_comp=list(settings.n_lamb_sh), app_dim=settings.data_dim_color,
            near_far=self.train_dataset.near_far, shadingMode=settings.shadingMode,
            alphaMask_thres=settings.alpha_mask_thre, density_shift=settings.density_shift,
            distance_scale=settings.distance_scale, rayMarch_weight_thres=settings.rm_weight_mask_thre,
            pos_pe=settings.pos_pe, view_pe=settings.view_pe, fea_pe=settings.fea_pe, featureC=settings.featureC,
            step_ratio=settings.step_ratio, fea2denseAct=settings.fea2denseAct, appearance_dim=settings.appearance_dim,
            refine_poses=bool(settings.refine_poses), n_views=self.train_dataset.n_views,
            importance_samples=settings.importance_samples, **contraction)

    def _adopt_model(self, model: TensorBase) -> None:
        """Train ``model`` with this run's kernels and sample jitter, the same on every rank."""
        model.kernels = self.config.runtime.kernels
        model.jitter_samples = self.config.schedule.perturb > 0
        model.shading_roulette = self.config.schedule.shading_roulette
        self.model = model
        self._synchronise_model()

    def _set_training_rays(self, keep: np.ndarray | None) -> None:
        """Train on the dataset's rays where ``keep`` is true (all for None), with a fresh sampler."""
        self.ray_keep = keep
        self.ray_batches = ray_batches(self.train_dataset, self.config.schedule.batch_size,
                                       self.config.schedule.seed, keep, with_views=self.model.n_views > 0)
        self._batch_iter = iter(self.ray_batches)

    # ------------------------------------------------------- state and resume
    def _capture(self) -> dict:
        return snapshot(self.iteration, self.model, self.optimizer, self.schedule_state, self.ray_keep,
                        self.ray_batches.state())

    def _restore(self, taken: dict) -> None:
        """Go back to a ``_capture`` result (or a state file's equivalent)."""
        schedule = self.config.schedule
        self._adopt_model(model_from_checkpoint(taken["model"], source="The training state"))
        self.schedule_state = ScheduleState.from_dict(taken["schedule"])
        self.optimizer = make_optimizer(self.model, schedule.lr_init, schedule.lr_basis)
        load_optimizer_state(self.optimizer, taken["optimizer"])
        if self.ray_batches is None or taken["ray_keep"] is not self.ray_keep:
            self._set_training_rays(taken["ray_keep"])
        self.ray_batches.restore(taken["sampler"])
        self.iteration = int(taken["iteration"])

    def _log_state(self) -> dict:
        """The training log's part of a state file: rows, time spent, events, progress display."""
        return {
            "rows": list(self.train_log.rows), "elapsed_s": time.time() - self._started,
            "events": list(self.events), "logged_events": self._logged_events,
            "recent_psnrs": list(self.recent_psnrs), "test_psnr": self.test_psnr, "last_psnr": self.last_psnr,
        }

    def _resume(self, state: dict) -> tuple[list[dict], float]:
        """Continue a state file's run; returns its training log's rows and training time so far."""
        self._restore(dict(state, ray_keep=unpack_ray_mask(state["rays"], self.train_dataset.n_rays)))
        log = state["log"]
        self.events, self._logged_events = [tuple(event) for event in log["events"]], log["logged_events"]
        self.recent_psnrs, self.test_psnr, self.last_psnr = list(log["recent_psnrs"]), log["test_psnr"], log["last_psnr"]
        return log["rows"], log["elapsed_s"]

    def _checkpoint(self, save: bool) -> bool:
        """Take the NaN guard's snapshot and, if ``save``, write it to the state file.

        Returns False instead when a parameter is no longer finite; training has then gone back
        to the previous snapshot (there must be one: the starting model must be finite).
        """
        bad = nonfinite_parameters(self.model)
        if bad and self.nan_guard.snapshot is None:
            raise CheckpointError(f"The model to train starts with non-finite values in {', '.join(bad[:3])}: "
                                  "the --ckpt or --resume file is damaged.")
        if bad:
            self._recover(self.iteration - 1, f"parameters {', '.join(bad[:3])} are not finite")
            return False
        taken = self._capture()
        self.nan_guard.keep(taken)
        if save and self.main_rank:
            contents = state_contents(taken, self.config.to_flags(), self.train_dataset.n_rays, self._log_state())
            save_atomically(contents, self.state_path)
        return True

    def _recover(self, iteration: int, what: str) -> None:
        """Go back to the last snapshot with halved learning rates, or give up after too many tries."""
        schedule = self.config.schedule
        taken = self.nan_guard.fail(iteration, what, advice=(
            f"Start again with a lower --lr_init (now {schedule.lr_init}) or --lr_basis (now {schedule.lr_basis}), "
            f"or a larger --batch_size (now {schedule.batch_size}); check the dataset if it happens early."))
        lr_scale = self.schedule_state.lr_scale * 0.5
        self._restore(taken)
        for group in self.optimizer.param_groups:
            group["lr"] = group["lr"] * lr_scale / self.schedule_state.lr_scale
        self.schedule_state.lr_scale = lr_scale
        text = f"{what} at iteration {iteration}: back to iteration {taken['iteration']}, learning rates x{lr_scale:g}"
        warnings.warn(f"{text}. Training goes on; if this repeats, lower --lr_init or raise --batch_size.")
        self.events.append((iteration, f"non-finite: {text}"))

    # ------------------------------------------------------------------ a step
    def train_step(self) -> float:
        """One optimisation step on the next ray batch; returns the batch's photometric MSE."""
        with stage("batch"):
            rays, rgbs, *view_ids = next(self._batch_iter)
        distortion_weight = self.config.schedule.distortion_weight if self.model.unbounded else 0.0
        maps = self.model(rays, white_bg=self.white_bg, is_train=True, ndc_ray=self.ndc_ray,
                          N_samples=self.schedule_state.nSamples, jitter=self._batch_jitter(),
                          with_distortion=distortion_weight > 0, view_ids=view_ids[0] if view_ids else None)
        mse = jt.sqr(maps[0] - rgbs).mean()
        reg, terms = regularisation(self.model, self.schedule_state, self.config.schedule.Ortho_weight, self.lr_factor)
        if distortion_weight > 0:
            terms["train/distortion"] = maps[-1].mean()
            reg = reg + distortion_weight * terms["train/distortion"]
        with stage("backward"):
            self.optimizer.zero_grad()
            self.optimizer.backward(mse + reg)
        with stage("optimizer"):
            self.optimizer.step()
            for group in self.optimizer.param_groups:
                group["lr"] = group["lr"] * self.lr_factor
        # The whole step runs here, in one graph: without this, the update would wait for
        # whatever next needs the parameters, and the step's time would land elsewhere.
        jt.sync_all()
        self.step_terms = terms
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
        """The alpha-mask event; the first also shrinks the box and switches the L1 weight, the
        second also filters the training rays."""
        new_aabb, texts = events.update_alpha_mask(self.model, self.schedule_state)
        if self.schedule.shrinks(iteration):
            replaced, shrink_texts = events.shrink(self.model, new_aabb)
            texts += shrink_texts
            if replaced:
                self._restart_optimizer_keeping_lr()
            self.schedule_state.L1_reg_weight = self.config.schedule.L1_weight_rest
        self.events += [(iteration, text) for text in texts]
        self._synchronise_model()
        if self.schedule.filters_rays(iteration) and not self.ndc_ray:
            self._set_training_rays(filter_training_rays(self.model, self.train_dataset, self.ray_batches.rows,
                                                         bbox_only=False))
            self.events.append((iteration, f"ray filtering kept {self.ray_batches.n_rays} rays"))

    def _restart_optimizer_keeping_lr(self) -> None:
        """New Adam over the model's current tensors at the current learning rates.

        Shrinking replaces every plane and line; an optimizer still holding the old ones would
        leave the new ones untrained until the next upsample (the reference does exactly that
        when a shrink does not coincide with an upsample, as it does for lego).
        """
        groups = self.optimizer.param_groups
        self.optimizer = make_optimizer(self.model, groups[0]["lr"], groups[-1]["lr"])

    def upsample(self, iteration: int) -> None:
        """The upsampling event: a larger grid, and Adam restarted at the schedule's learning rates."""
        schedule = self.config.schedule
        text = events.upsample(self.model, self.schedule_state, self.schedule.voxels_after_upsample(iteration),
                               self.config.model)
        self._synchronise_model()
        lr_scale = events.learning_rate_scale_after_upsample(schedule, iteration) * self.schedule_state.lr_scale
        self.optimizer = make_optimizer(self.model, schedule.lr_init * lr_scale, schedule.lr_basis * lr_scale)
        self.events.append((iteration, text))

    def visualize(self, iteration: int) -> float:
        if not self.main_rank:
            return self.test_psnr
        summary = evaluate(self.test_dataset, self.model, os.path.join(self.logfolder, "imgs_vis"),
                           N_vis=self.config.render.N_vis, prefix=f"{iteration:06d}_", N_samples=self.schedule_state.nSamples,
                           white_bg=self.white_bg, compute_extra_metrics=False, chunk=self.config.render.chunk_size,
                           show_progress=False, ndc_ray=self.ndc_ray)
        return summary.get("psnr", 0.0)

    # -------------------------------------------------------------------- run
    def _log(self, iteration: int, **values) -> None:
        """A training-log row with the current learning rates, grid size and number of training rays."""
        groups = self.optimizer.param_groups
        self.train_log.row(iteration, lr_grid=groups[0]["lr"], lr_network=groups[-1]["lr"],
                           grid_size=self.model.gridSize, n_rays=self.ray_batches.n_rays, **values)

    def _tensorboard_step(self, iteration: int, mse: float) -> None:
        """The reference's per-iteration scalars and ours (``training.tensorboard``), every
        ``tensorboard_every`` iterations. The step's sync computed the regularisers already;
        they are copied out together, here only."""
        if not self.tensorboard_on or iteration % self.config.output.tensorboard_every:
            return
        tags = list(self.step_terms)
        values = np.concatenate([term.numpy().reshape(-1) for term in self.step_terms.values()]) if tags else []
        groups = self.optimizer.param_groups
        self.tensorboard.scalars(iteration, {
            "train/PSNR": self.last_psnr, "train/mse": mse, **dict(zip(tags, values)),
            "train/s_per_iter": self.step_times[-1], "train/lr_grid": groups[0]["lr"],
            "train/lr_network": groups[-1]["lr"], "train/grid_voxels": int(np.prod(self.model.gridSize)),
            "train/n_rays": self.ray_batches.n_rays})

    def _request_stop(self, signum: int) -> None:
        """SIGINT / SIGTERM: stop after the current step and save; a second one stops at once."""
        if self.stop_signal is not None:
            raise KeyboardInterrupt
        self.stop_signal = signum

    def _run_iteration(self, progress: tqdm) -> None:
        """Train iteration ``self.iteration`` and run the events scheduled after it."""
        config = self.config
        iteration = self.iteration
        seed_iteration(config.schedule.seed, iteration)
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
        self._tensorboard_step(iteration, mse)
        if iteration % config.output.progress_refresh_rate == 0:
            window_psnr = float(np.mean(self.recent_psnrs))
            progress.set_description(
                f"Iteration {iteration:05d}: train_psnr = {window_psnr:.2f} "
                f"test_psnr = {self.test_psnr:.2f} mse = {mse:.6f}")
            self._log(iteration, mse=mse, train_psnr=window_psnr)
            self.recent_psnrs = []
        if config.render.N_vis != 0 and iteration % config.render.vis_every == config.render.vis_every - 1:
            self.test_psnr = self.visualize(iteration)
            self._log(iteration, test_psnr=self.test_psnr, event="test views rendered (imgs_vis)")
            self.tensorboard.scalars(iteration, {"test/psnr": self.test_psnr})
        if self.schedule.updates_alpha_mask(iteration):
            self.update_alpha_mask(iteration)
        if self.schedule.upsamples(iteration):
            self.upsample(iteration)
        for event_iteration, text in self.events[self._logged_events:]:
            if self.main_rank:
                progress.write(f"[{event_iteration}] {text}")
            self._log(event_iteration, event=text)
        self._logged_events = len(self.events)
        self.iteration += 1
        self.nan_guard.passed(iteration)
        snapshot_every = config.output.save_every or SNAPSHOT_EVERY_WITHOUT_SAVES
        if self.iteration % snapshot_every == 0 and self.iteration < config.schedule.n_iters:
            self._checkpoint(save=config.output.save_every > 0)
        if config.runtime.gc_every > 0 and self.iteration % config.runtime.gc_every == 0:
            free_memory()
            self.cache_trim.reset()

    def run(self) -> TrainResult:
        config = self.config
        n_iters = config.schedule.n_iters
        self._started = time.time() - self._elapsed_before
        progress = tqdm(total=n_iters, initial=self.iteration, miniters=config.output.progress_refresh_rate,
                        file=sys.stdout, dynamic_ncols=True, disable=not self.main_rank)
        if config.viewer.viewer and self.main_rank:
            self._start_viewer(progress)
        try:
            with stop_requests(self._request_stop):
                self._checkpoint(save=False)
                while True:
                    if self.iteration < n_iters and not self.stop_agreed:
                        self._run_iteration(progress)
                        self._serve_viewer()
                    elif self._checkpoint(save=True):  # finished or asked to stop: save, unless a tensor went bad
                        break
                    if progress.n + 1 == self.iteration:
                        progress.update(1)
                    elif progress.n != self.iteration:  # the NaN guard went back
                        progress.n = self.iteration
                        progress.refresh()
        except (RuntimeError, MemoryError) as err:
            explain_jittor_error(err, config, f"training (iteration {self.iteration})")
            raise
        finally:
            if self.viewer is not None:
                self.viewer.close()
                self.viewer = None
        progress.close()
        distributed.barrier()  # rank 0 has saved the state before any rank can leave
        if distributed.world_size() > 1:
            state = self.model.state_dict()
            distributed.check_ranks_agree(list(state.values()), list(state))
        checkpoint = os.path.join(self.logfolder, f"{config.output.expname}.th")
        if self.main_rank:
            save_checkpoint(self.model, checkpoint, train_args=config.to_flags())
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
                explain_jittor_error(err, config, "rendering after training")
                raise
        self.train_log.close()
        self.tensorboard.close()
        return result

    # ----------------------------------------------------------------- viewer
    def _start_viewer(self, progress: tqdm) -> None:
        """Serve the browser viewer for this run (``tensorf_jt.viewer``)."""
        from tensorf_jt.viewer.frames import RenderSettings
        from tensorf_jt.viewer.scene import model_boxes, scene_view
        from tensorf_jt.viewer.server import Viewer

        scene = scene_view(self.train_dataset)
        settings = RenderSettings(white_bg=self.white_bg, ndc_ray=self.ndc_ray,
                                  chunk=min(self.config.render.chunk_size, 4096), near_far=scene.near_far)
        model_box, mask_box = model_boxes(self.model)
        self.viewer = Viewer(scene, settings, os.path.join(self.logfolder, "viewer"),
                             host=self.config.viewer.viewer_host, port=self.config.viewer.viewer_port,
                             training=True, model_box=model_box, mask_box=mask_box)
        self._viewer_events = len(self.events)
        progress.write(f"viewer: {self.viewer.url}")

    def _serve_viewer(self) -> None:
        """After a step: tell the viewer the model changed (with new boxes after a grid event),
        let it render within its share of the step's time, and hold here while it is paused."""
        viewer = self.viewer
        if viewer is None:
            return
        if len(self.events) != self._viewer_events:
            from tensorf_jt.viewer.scene import model_boxes

            self._viewer_events = len(self.events)
            viewer.model_changed(*model_boxes(self.model))
        else:
            viewer.model_changed()
        if viewer.client_count:
            viewer.show_status(self._viewer_status())
        viewer.after_step(self.model, self.step_times[-1] if self.step_times else 0.0)
        while viewer.paused and self.stop_signal is None:
            viewer.show_status(self._viewer_status() + "\n\n**paused**")
            if not viewer.service(self.model, 0.05):
                time.sleep(0.02)

    def _viewer_status(self) -> str:
        grid = "x".join(str(int(n)) for n in self.model.gridSize)
        return (f"iteration **{self.iteration}** / {self.config.schedule.n_iters}  \n"
                f"loss (MSE) {10 ** (-self.last_psnr / 10):.5f}, train PSNR {self.last_psnr:.2f} dB, "
                f"test PSNR {self.test_psnr:.2f} dB  \n"
                f"grid {grid}, {self.ray_batches.n_rays} training rays")

    def _render_results(self, result: TrainResult) -> None:
        """The renders the flags ask for after training: training views, test views, camera path."""
        render = self.config.render
        if render.render_train:
            train_views = load_split(self.config.data, "train", is_stack=True)
            evaluate(train_views, self.model, os.path.join(self.logfolder, "imgs_train_all"),
                     white_bg=self.white_bg, chunk=render.chunk_size, ndc_ray=self.ndc_ray,
                     compute_extra_metrics=render.compute_extra_metrics)
        if render.render_test:
            result.test_metrics = evaluate(self.test_dataset, self.model, os.path.join(self.logfolder, "imgs_test_all"),
                                           white_bg=self.white_bg, chunk=render.chunk_size, ndc_ray=self.ndc_ray,
                                           compute_extra_metrics=render.compute_extra_metrics)
            self._log(self.config.schedule.n_iters - 1, test_psnr=result.test_metrics["psnr"],
                      event="test split rendered")
            self.tensorboard.scalars(self.config.schedule.n_iters - 1, {"test/psnr_all": result.test_metrics["psnr"]})
        if render.render_path:
            evaluate_path(self.test_dataset, self.model, os.path.join(self.logfolder, "imgs_path_all"),
                          white_bg=self.white_bg, ndc_ray=self.ndc_ray, chunk=render.chunk_size)


def resume_path(config: RunConfig) -> str | None:
    """The state file ``--resume`` names; for ``auto`` the newest of this run (None: there is none yet)."""
    output = config.output
    if output.resume != "auto":
        return output.resume
    if not output.expname:
        raise ConfigError("--resume auto looks for the run by its expname: give --config or --expname too.")
    return find_latest_state(output.basedir, output.expname)


def train(config: RunConfig, explicit: set[str] = frozenset()) -> TrainResult:
    """Train as ``config`` says; with ``resume`` set, continue the saved run instead.

    ``explicit``: the flags set on the command line or in the config file (see
    ``config.parse_run_config``); when resuming, the others come from the saved run.
    """
    if not config.output.resume:
        return Trainer(config).run()
    if config.model.ckpt:
        raise ConfigError("--ckpt starts a new run from a model, --resume continues a saved run: give only one.")
    path = resume_path(config)
    if path is None:
        print(f"--resume auto: no saved state of '{config.output.expname}' under '{config.output.basedir}' yet; "
              "starting a new run.")
        return Trainer(config).run()
    state = read_state(path)
    return Trainer(resumed(config, set(explicit), state["train_args"]), state=state,
                   logfolder=os.path.dirname(os.path.abspath(path))).run()
