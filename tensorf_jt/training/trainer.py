"""The training loop (reference ``train.py: reconstruction``): it orchestrates, the parts live elsewhere.

Per iteration one step (``training.step``); between steps, the schedule's grid events
(``training.events``, whose outcome the trainer applies: a new Adam, filtered training rays,
the tensors shared between MPI ranks), test renders (``training.renders``), memory cleanup
(``runtime.memory``), the log (``training.log``) and the browser viewer (``training.live_viewer``).
Every ``save_every`` iterations and at the end the training state is written
(``training.state``), from which ``--resume`` continues exactly; SIGINT and SIGTERM stop after
the current step and save; a non-finite loss goes back to the last good snapshot with halved
learning rates (``training.nan_guard``).
"""
from __future__ import annotations

import math
import os
import signal
import statistics
import sys
import time
import warnings

import numpy as np
import jittor as jt
from tqdm.auto import tqdm

from tensorf_jt.config import RunConfig, require_for_training
from tensorf_jt.dataLoader import load_split, prepare_dataset
from tensorf_jt.dataLoader.scene_fit import scene_summary
from tensorf_jt.errors import CheckpointError
from tensorf_jt.evaluation.metrics import mse_to_psnr
from tensorf_jt.formats.checkpoint import load_checkpoint, model_from_checkpoint, save_atomically, save_checkpoint
from tensorf_jt.models.factory import check_fits_space, new_model, scene_space
from tensorf_jt.runtime import distributed
from tensorf_jt.runtime.error_hints import explain_jittor_error
from tensorf_jt.runtime.memory import CacheTrim, free_memory, peak_rss_mb
from tensorf_jt.runtime.profiling import stage
from tensorf_jt.runtime.seeding import seed_everything, seed_iteration
from tensorf_jt.runtime.signals import stop_requests
from tensorf_jt.training import events
from tensorf_jt.training.live_viewer import LiveViewer
from tensorf_jt.training.log import TrainingLog, run_folder
from tensorf_jt.training.nan_guard import SNAPSHOT_EVERY_WITHOUT_SAVES, NanGuard, nonfinite_parameters
from tensorf_jt.training.optimizer import make_optimizer
from tensorf_jt.training.ray_filtering import batch_jitter, filter_training_rays, ray_batches
from tensorf_jt.training.renders import render_after_training, render_test_views
from tensorf_jt.training.resolution import capped_schedule, resumed_schedule
from tensorf_jt.training.run_state import PendingLosses, RunProgress, TrainResult
from tensorf_jt.training.schedules import (N_to_reso, ScheduleState, reads_losses_after,
                                          renders_test_views_after)
from tensorf_jt.training.state import load_optimizer_state, snapshot, state_contents, state_path, unpack_ray_mask
from tensorf_jt.training.sparse_depth import keypoint_batches
from tensorf_jt.training.step import StepPolicy, train_step
from tensorf_jt.training.tensorboard import TensorBoardLog


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
        self.space = scene_space(config.data, self.train_dataset)
        if self.main_rank:
            print(f"{scene_summary(self.train_dataset)}; {self.space.summary()}", flush=True)
        self.white_bg = self.train_dataset.white_bg or config.data.white_bkgd
        self.logfolder = run_folder(config.output, logfolder, create=self.main_rank)
        self.state_path = state_path(self.logfolder, config.output.expname)
        self.schedule = capped_schedule(config.schedule, self.space, self.train_dataset, self.main_rank)
        self.policy = StepPolicy.from_config(config.schedule, self.white_bg)
        self.keypoints = keypoint_batches(config.schedule, self.train_dataset, self.main_rank)
        self.iteration = 0  # iterations completed: the next one to run
        self.progress = RunProgress()
        self.stop_signal: int | None = None  # SIGINT / SIGTERM received (by any rank, once agreed)
        self.stop_agreed = False  # every rank knows the run stops: the loop's only stop test
        self.ray_batches = None
        self.ray_keep: np.ndarray | None = None  # which of the dataset's training rays are trained on
        self.nan_guard = NanGuard()
        self.step_terms: dict[str, jt.Var] = {}  # the last step's regularisers (computed), for TensorBoard
        self.pending_losses = PendingLosses()  # the steps' losses since they were last read
        self.viewer: LiveViewer | None = None  # rank 0, --viewer 1; started by run()
        log_rows, elapsed_before = [], 0.0  # a resumed run's log and training time so far
        if state is None:
            self._start_new_run()
        else:
            log_rows, elapsed_before = self._resume(state)
            self.schedule = resumed_schedule(self.schedule, config.schedule, self.space, self.train_dataset,
                                             self.schedule_state, self.main_rank)
        self._elapsed_before = elapsed_before
        self.train_log = TrainingLog(self.logfolder, rows=log_rows, elapsed_s=elapsed_before, write=self.main_rank)
        self.tensorboard = TensorBoardLog(self.logfolder, enabled=self.main_rank and config.output.tensorboard)
        self.step_times: list[float] = []
        self.cache_trim = CacheTrim(config.runtime.gc_growth)

    # ------------------------------------------------------------------- setup
    def _start_new_run(self) -> None:
        config, schedule = self.config, self.config.schedule
        reso = N_to_reso(self.schedule.initial_voxels, self.space.grid_box)
        if config.model.ckpt is not None:
            model, _ = load_checkpoint(config.model.ckpt, config.model.model_name, ndc_ray=self.space.ndc_ray)
            check_fits_space(model, self.space, config.model.ckpt)
            model.kernels = config.runtime.kernels
        else:
            model = new_model(config.model, self.space, reso, self.train_dataset, config.runtime.kernels)
        self.schedule_state = ScheduleState(
            reso_cur=reso, reso_mask=reso, nSamples=model.sampler.samples_per_ray(reso, config.model.nSamples),
            L1_reg_weight=schedule.L1_weight_inital, TV_weight_density=schedule.TV_weight_density,
            TV_weight_app=schedule.TV_weight_app)
        self.model = model
        self._synchronise_model()
        self.optimizer = make_optimizer(self.model, schedule.lr_init, schedule.lr_basis)
        filtered = self.model.sampler.filters_rays  # the reference filters no NDC rays
        self._set_training_rays(filter_training_rays(self.model, self.train_dataset, None, bbox_only=True)
                                if filtered else None)

    def _set_training_rays(self, keep: np.ndarray | None) -> None:
        """Train on the dataset's rays where ``keep`` is true (all for None), with a fresh sampler."""
        self.ray_keep = keep
        self.ray_batches = ray_batches(self.train_dataset, self.config.schedule.batch_size,
                                       self.config.schedule.seed, keep)
        self._batch_iter = iter(self.ray_batches)

    # ------------------------------------------------------- state and resume
    def _restore(self, taken: dict) -> None:
        """Go back to a snapshot (``training.state.snapshot``, or a state file's equivalent)."""
        schedule = self.config.schedule
        self.model = model_from_checkpoint(taken["model"], source="The training state", ndc_ray=self.space.ndc_ray)
        self.model.kernels = self.config.runtime.kernels
        self._synchronise_model()
        self.schedule_state = ScheduleState.from_dict(taken["schedule"])
        expected = self.model.sampler.samples_per_ray(list(self.schedule_state.reso_cur), self.config.model.nSamples)
        if self.schedule_state.nSamples != expected:
            raise CheckpointError(f"The training state's schedule has {self.schedule_state.nSamples:,} samples a ray "
                                  f"where its grid {list(self.schedule_state.reso_cur)} gives {expected:,}; the file "
                                  "is damaged.")
        self.optimizer = make_optimizer(self.model, schedule.lr_init, schedule.lr_basis)
        load_optimizer_state(self.optimizer, taken["optimizer"], self.model.field)
        if self.ray_batches is None or taken["ray_keep"] is not self.ray_keep:
            self._set_training_rays(taken["ray_keep"])
        self.ray_batches.restore(taken["sampler"])
        self.iteration = int(taken["iteration"])
        self.pending_losses.clear()

    def _resume(self, state: dict) -> tuple[list[dict], float]:
        """Continue a state file's run; returns its training log's rows and training time so far."""
        self._restore(dict(state, ray_keep=unpack_ray_mask(state["rays"], self.train_dataset.n_rays)))
        self.progress = RunProgress.from_dict(state["log"])
        return state["log"]["rows"], state["log"]["elapsed_s"]

    def _checkpoint(self, save: bool) -> bool:
        """Take the NaN guard's snapshot and, if ``save``, write it to the state file.

        Returns False instead when a loss since the last read or a parameter is no longer finite;
        training has then gone back to the previous snapshot (there must be one: the starting
        model must be finite).
        """
        if not self._read_losses(None):
            return False
        bad = nonfinite_parameters(self.model)
        if bad and self.nan_guard.snapshot is None:
            raise CheckpointError(f"The model to train starts with non-finite values in {', '.join(bad[:3])}: "
                                  "the --ckpt or --resume file is damaged.")
        if bad:
            self._recover(self.iteration - 1, f"parameters {', '.join(bad[:3])} are not finite")
            return False
        taken = snapshot(self.iteration, self.model, self.optimizer, self.schedule_state, self.ray_keep,
                         self.ray_batches.state())
        self.nan_guard.keep(taken)
        if save and self.main_rank:
            log = {"rows": list(self.train_log.rows), "elapsed_s": time.time() - self._started,
                   **self.progress.to_dict()}
            save_atomically(state_contents(taken, self.config.to_flags(), self.train_dataset.n_rays, log),
                            self.state_path)
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
        self.progress.events.append((iteration, f"non-finite: {text}"))

    # ------------------------------------------------------------------ a step
    def train_step(self) -> jt.Var:
        """One optimisation step on the next ray batch; returns the batch's photometric MSE, a
        computed Var [1] that is not read (``PendingLosses``)."""
        with stage("batch"):
            batch = next(self._batch_iter)
            keypoints = self.keypoints.batch(self.iteration) if self.keypoints is not None else None
        n_samples = self.schedule_state.nSamples
        jitter = batch_jitter(self.model, self.ray_batches, self.policy.perturb, n_samples)
        mse, self.step_terms = train_step(self.model, self.optimizer, batch, self.policy, self.schedule_state,
                                          n_samples, jitter, keypoints)
        return mse

    def _synchronise_model(self) -> None:
        """Give every rank rank 0's parameters and alpha grid after the model is built, restored or
        changed by a grid event. The ranks compute the same numbers anyway; this keeps them equal
        even where a computation's floating-point order is not fixed (atomic adds on GPUs)."""
        distributed.broadcast_model(self.model)

    def update_alpha_mask(self, iteration: int) -> None:
        """The alpha-mask event (``events.update_alpha_mask``) and what it asks of the run."""
        self._apply(iteration, events.update_alpha_mask(self.model, self.schedule_state, self.schedule,
                                                        self.config.schedule, iteration))

    def upsample(self, iteration: int) -> None:
        """The upsampling event (``events.upsample``) and what it asks of the run."""
        self._apply(iteration, events.upsample(self.model, self.schedule_state,
                                               self.schedule.voxels_after_upsample(iteration), self.config.model,
                                               self.config.schedule, iteration))

    def _apply(self, iteration: int, outcome: events.EventOutcome) -> None:
        """Carry out what a grid event asks of the run: the new tensors shared, Adam restarted over
        them, the training rays filtered."""
        self.progress.events += [(iteration, text) for text in outcome.texts]
        self._synchronise_model()
        if outcome.restart_optimizer:
            schedule, groups = self.config.schedule, self.optimizer.param_groups
            lr_grid, lr_network = ((groups[0]["lr"], groups[-1]["lr"]) if outcome.keep_learning_rates else
                                   (schedule.lr_init * outcome.lr_scale, schedule.lr_basis * outcome.lr_scale))
            self.optimizer = make_optimizer(self.model, lr_grid, lr_network)
        if outcome.filter_rays:
            self._set_training_rays(filter_training_rays(self.model, self.train_dataset, self.ray_batches.rows,
                                                         bbox_only=False))
            self.progress.events.append((iteration, f"ray filtering kept {self.ray_batches.n_rays} rays"))

    # -------------------------------------------------------------------- run
    def _log(self, iteration: int, **values) -> None:
        """A training-log row with the current learning rates, grid size and number of training rays."""
        groups = self.optimizer.param_groups
        self.train_log.row(iteration, lr_grid=groups[0]["lr"], lr_network=groups[-1]["lr"],
                           grid_size=self.model.gridSize, n_rays=self.ray_batches.n_rays, **values)

    def _request_stop(self, signum: int) -> None:
        """SIGINT / SIGTERM: stop after the current step and save; a second one stops at once."""
        if self.stop_signal is not None:
            raise KeyboardInterrupt
        self.stop_signal = signum

    def _read_losses(self, progress: tqdm | None) -> bool:
        """Read the pending steps' losses (one wait for the device), log them and agree with the
        other ranks on stopping. A non-finite one sends training back to the last snapshot
        (``_recover``); then returns False."""
        read, stop = self.pending_losses.read(self.stop_signal is not None)
        if stop:
            self.stop_agreed = True
            self.stop_signal = self.stop_signal or signal.SIGTERM  # another rank was asked to stop
        for iteration, mse in read:
            if not math.isfinite(mse):
                self._recover(iteration, f"the loss is {mse}")
                return False
            self._record_loss(iteration, mse, progress)
        if read:
            self.nan_guard.passed(read[-1][0])
        return True

    def _record_loss(self, iteration: int, mse: float, progress: tqdm | None) -> None:
        """A step's loss into the progress display, the training log and TensorBoard (at their
        intervals; the step's regularisers are those of the last step, read with it)."""
        config, record = self.config, self.progress
        record.last_psnr = mse_to_psnr(mse)
        record.recent_psnrs.append(record.last_psnr)
        if iteration % config.output.tensorboard_every == 0:
            groups = self.optimizer.param_groups
            self.tensorboard.training_step(iteration, record.last_psnr, mse, self.step_terms, self.step_times[-1],
                                           (groups[0]["lr"], groups[-1]["lr"]), self.model.gridSize,
                                           self.ray_batches.n_rays)
        if iteration % config.output.progress_refresh_rate == 0:
            window_psnr = float(np.mean(record.recent_psnrs))
            if progress is not None:
                progress.set_description(f"Iteration {iteration:05d}: train_psnr = {window_psnr:.2f} "
                                         f"test_psnr = {record.test_psnr:.2f} mse = {mse:.6f}")
            self._log(iteration, mse=mse, train_psnr=window_psnr)
            record.recent_psnrs = []

    def _run_iteration(self, progress: tqdm) -> None:
        """Train iteration ``self.iteration`` and run the events scheduled after it."""
        config, iteration, record = self.config, self.iteration, self.progress
        seed_iteration(config.schedule.seed, iteration)
        tick = time.time()
        self.pending_losses.add(iteration, self.train_step())
        self.step_times.append(time.time() - tick)
        self.cache_trim.check()
        if distributed.world_size() == 1 and self.stop_signal is not None:
            self.stop_agreed = True
        if reads_losses_after(self.config, self.schedule, iteration) and not self._read_losses(progress):
            return
        if renders_test_views_after(self.config.render, iteration):
            if self.main_rank:  # the others keep the last one
                record.test_psnr = render_test_views(config, self.test_dataset, self.model, self.logfolder,
                                                     self.white_bg, iteration, self.schedule_state.nSamples)
            self._log(iteration, test_psnr=record.test_psnr, event="test views rendered (imgs_vis)")
            self.tensorboard.scalars(iteration, {"test/psnr": record.test_psnr})
        if self.schedule.updates_alpha_mask(iteration):
            self.update_alpha_mask(iteration)
        if self.schedule.upsamples(iteration):
            self.upsample(iteration)
        for event_iteration, text in record.events[record.logged_events:]:
            if self.main_rank:
                progress.write(f"[{event_iteration}] {text}")
            self._log(event_iteration, event=text)
        record.logged_events = len(record.events)
        self.iteration += 1
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
            self.viewer = LiveViewer(config, self.train_dataset, self.model, self.white_bg, self.logfolder,
                                     len(self.progress.events))
            progress.write(f"viewer: {self.viewer.url}")
        try:
            with stop_requests(self._request_stop):
                self._checkpoint(save=False)
                while True:
                    if self.iteration < n_iters and not self.stop_agreed:
                        self._run_iteration(progress)
                        if self.viewer is not None:
                            self.viewer.after_step(self, lambda: self.stop_signal is not None)
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
            state = self.model.field.state_dict()
            distributed.check_ranks_agree(list(state.values()), list(state))
        checkpoint = os.path.join(self.logfolder, f"{config.output.expname}.th")
        if self.main_rank:
            save_checkpoint(self.model, checkpoint, train_args=config.to_flags())
        settled = self.step_times[len(self.step_times) // 10:]  # leave out the first steps' kernel compiles
        result = TrainResult(
            logfolder=self.logfolder, checkpoint=checkpoint, state=self.state_path, iterations=self.iteration,
            wall_time_s=time.time() - self._started,
            seconds_per_iter_median=statistics.median(settled) if settled else float("nan"),
            peak_rss_mb=peak_rss_mb(), final_train_psnr=self.progress.last_psnr, events=list(self.progress.events),
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

    def _render_results(self, result: TrainResult) -> None:
        """The renders the flags ask for after training; the test views' PSNR goes to the logs."""
        result.test_metrics = render_after_training(self.config, self.test_dataset, self.model, self.logfolder,
                                                    self.white_bg)
        if result.test_metrics is not None:
            last = self.config.schedule.n_iters - 1
            self._log(last, test_psnr=result.test_metrics["psnr"], event="test split rendered")
            self.tensorboard.scalars(last, {"test/psnr_all": result.test_metrics["psnr"]})
