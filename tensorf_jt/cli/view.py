"""``view.py --ckpt log/NAME/NAME.th``: serve a checkpoint in the browser viewer until Ctrl+C.

The scene (training cameras, thumbnails, depth range) comes from the dataset the checkpoint
was trained on, as for ``render.py``; when that dataset cannot be loaded the model is shown
without its cameras. Saved views and camera paths go to ``viewer/`` next to the checkpoint.

``view.py --splats FILE.ply [--datadir D --dataset_name N]`` serves a splat file instead,
drawn by the browser itself (``viewer.splat_view``), with the scene's training cameras where
its dataset is given.
"""
from __future__ import annotations

import os
import signal
import sys
import time
import traceback
import warnings

from tensorf_jt.cli import run_cli
from tensorf_jt.config import RunConfig, parse_run_config
from tensorf_jt.errors import ConfigError, DatasetError
from tensorf_jt.runtime import setup

IDLE_SLEEP_S = 0.01  # between polls while every browser's frame is up to date
SERVICE_SLICE_S = 0.05  # rendering time between polls for new camera positions


def open_checkpoint_viewer(config: RunConfig, explicit: set[str] = frozenset()):
    """Load ``config.model.ckpt`` and start its viewer; returns (viewer, model)."""
    from tensorf_jt.cli.render import explicit_ndc, training_scene
    from tensorf_jt.dataLoader import load_split, prepare_dataset
    from tensorf_jt.formats.checkpoint import load_checkpoint
    from tensorf_jt.viewer.frames import RenderSettings
    from tensorf_jt.viewer.scene import model_boxes, scene_view
    from tensorf_jt.viewer.server import SceneView, Viewer, check_port_free

    ckpt_path = config.model.ckpt
    if not ckpt_path:
        raise ConfigError("--ckpt is required: the checkpoint (.th) to view.")
    check_port_free(config.viewer.viewer_host, config.viewer.viewer_port)
    model, ckpt = load_checkpoint(ckpt_path, config.model.model_name, explicit_ndc(config, explicit))
    if "kernels" in explicit:
        model.kernels = config.runtime.kernels
    scene = SceneView(cameras=None, thumbnails=[], near_far=tuple(float(v) for v in model.sampler.near_far))
    try:
        config = training_scene(config, ckpt, explicit)
        prepare_dataset(config.data)
        dataset = load_split(config.data, "train", is_stack=False)
        scene = scene_view(dataset)
        white_bg = dataset.white_bg or config.data.white_bkgd
    except (ConfigError, DatasetError) as err:
        warnings.warn(f"Showing the model without its training cameras: {err}")
        white_bg = config.data.white_bkgd or not config.data.ndc_ray
    settings = RenderSettings(white_bg=white_bg, chunk=min(config.render.chunk_size, 4096), near_far=scene.near_far)
    output_dir = os.path.join(os.path.dirname(os.path.abspath(ckpt_path)), "viewer")
    model_box, mask_box = model_boxes(model)
    viewer = Viewer(scene, settings, output_dir, host=config.viewer.viewer_host, port=config.viewer.viewer_port,
                    model_box=model_box, mask_box=mask_box)
    return viewer, model


def open_splat_viewer(config: RunConfig, explicit: set[str] = frozenset()):
    """Read ``config.render.splats`` and start its viewer (with the training cameras of the
    dataset the flags name, where they name one); returns the viewer."""
    from tensorf_jt.dataLoader import load_split, prepare_dataset
    from tensorf_jt.formats.gaussian_ply import read_splats
    from tensorf_jt.viewer.scene import scene_view
    from tensorf_jt.viewer.server import check_port_free
    from tensorf_jt.viewer.splat_view import SplatViewer

    check_port_free(config.viewer.viewer_host, config.viewer.viewer_port)
    splats = read_splats(config.render.splats)
    scene = None
    if "datadir" in explicit:
        prepare_dataset(config.data)
        scene = scene_view(load_split(config.data, "train", is_stack=False))
    return SplatViewer(splats, scene, host=config.viewer.viewer_host, port=config.viewer.viewer_port)


def serve(viewer, model, stop_after_s: float | None = None) -> None:
    """Render for the connected browsers until Ctrl+C (or ``stop_after_s`` seconds)."""
    started = time.perf_counter()
    while stop_after_s is None or time.perf_counter() - started < stop_after_s:
        if not viewer.service(model, SERVICE_SLICE_S):
            time.sleep(IDLE_SLEEP_S)


def _main(argv: list[str]) -> int:
    config, explicit = parse_run_config(argv)
    setup()
    from tensorf_jt.runtime.error_hints import jittor_error_hints
    with jittor_error_hints(config, "viewing"):
        if config.render.splats:
            viewer, model = open_splat_viewer(config, explicit), None
        else:
            viewer, model = open_checkpoint_viewer(config, explicit)
        print(f"viewer: {viewer.url}  (Ctrl+C to stop)", flush=True)
        # Ctrl+C ends serving normally (Jittor's own handler would end the process at once).
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            if model is None:
                while True:  # the browser draws the splats; nothing to render here
                    time.sleep(0.5)
            serve(viewer, model)
        except KeyboardInterrupt:
            print("viewer stopped", flush=True)
        finally:
            signal.signal(signal.SIGINT, previous)
            viewer.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_cli(lambda: _main(sys.argv[1:] if argv is None else list(argv)))


def entry_point() -> None:
    """The ``tensorf-view`` command: ``main``, then leave the process at once, whatever the status:
    nothing is left to write, and after Ctrl+C the interpreter's shutdown can wait forever on
    the web server's threads and Jittor's exit handlers."""
    try:
        status = main()
    except BaseException:  # a bug: show where
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    entry_point()
