"""The browser viewer: a viser server whose frames the caller's thread renders.

Jittor is not thread-safe, and viser runs its callbacks on its own threads. So the callbacks
only record what a browser asks for (its camera, its GUI choices) in that browser's
``ClientView``; the thread that owns the model calls ``Viewer.service`` (from ``view.py``'s
loop) or ``Viewer.after_step`` (between training steps), which renders pending frames a chunk
at a time until its time is up and sends finished ones back as the page's background image.

After a camera change a browser first gets a preview sized so that it renders in about
``PREVIEW_SECONDS`` at the measured ray rate, then, if the camera has not moved again, the
frame at full size. During training the time spent here is paid for out of a credit that each
step adds ``TRAINING_SHARE`` of its own duration to, so the viewer's rendering takes at most
that share of the training time, and the learning model is redrawn at most every
``LIVE_EVERY_S``; with no browser connected nothing is rendered or sent.
"""
from __future__ import annotations

import math
import os
import socket
import threading
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from tensorf_jt.dataLoader.scene_preview import box_edges
from tensorf_jt.errors import ConfigError
from tensorf_jt.formats.ownership import unused_path
from tensorf_jt.rendering.rays import camera_rays
from tensorf_jt.viewer.keyframes import PathCamera, interpolate, write_camera_path
from tensorf_jt.viewer.cameras import (SceneCameras, ViewerCamera, camera_from_viser, quaternion_from_matrix)
from tensorf_jt.viewer.frames import OUTPUTS, FrameJob, RenderSettings

PREVIEW_SECONDS = 0.25  # render time aimed at for the first frame after a camera change
LIVE_SECONDS = 0.5  # render time aimed at for a frame of a model that is training
# At most one new frame of a training model this often (a camera change is answered at once).
# Each costs its render (LIVE_SECONDS on every core) and a redraw of the page, which a browser
# drawing in software pays in CPU time of its own (bench/browser_cpu.py); what that costs training
# is in docs/BENCHMARKS.md#viewer.
LIVE_EVERY_S = 10.0
TRAINING_SHARE = 0.2  # viewer time per second of training time while browsers are connected
MIN_PREVIEW_SIDE = 48
DEFAULT_MAX_SIDE = 512
STATUS_EVERY_S = 0.5  # training status text refresh


@dataclass(frozen=True)
class SceneView:
    """What the page shows besides the frames: the scene's cameras (None when the dataset could
    not be loaded), their thumbnails (uint8 [h, w, 3] each), and the depth range of the colour map."""

    cameras: SceneCameras | None
    thumbnails: list[np.ndarray]
    near_far: tuple[float, float]


@dataclass
class ClientView:
    """One browser: its latest camera (written by viser's threads), its choices, its frame."""

    client: object
    camera: tuple | None = None  # (wxyz, position, fov_y, aspect) as the browser reported it
    camera_version: int = 0
    output: str = "RGB"
    max_side: int = DEFAULT_MAX_SIDE
    keyframes: list[PathCamera] = field(default_factory=list)
    job: FrameJob | None = None
    shown: tuple | None = None  # (camera_version, full size?, model_version, output, max_side) on screen
    last_frame: np.ndarray | None = None  # the last full-size frame, for "save view"
    frames_sent: int = 0
    sent_at: float = 0.0  # when the frame on screen was sent (time.perf_counter)
    gui: dict = field(default_factory=dict)


def check_port_free(host: str, port: int) -> None:
    """Refuse a port another program listens on (viser would quietly move to the next one)."""
    if not 0 < port < 65536:
        raise ConfigError(f"--viewer_port {port} is not a port number; use one in 1024-65535, e.g. 8080.")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            raise ConfigError(f"The viewer cannot listen on {host}:{port} ({err.strerror}): another program "
                              f"uses it. Pass another port, e.g. --viewer_port {port + 1}.") from None


def add_training_frusta(server, cameras: SceneCameras, thumbnails: list, shown: bool = True):
    """The training cameras as frustums with their thumbnails, and a checkbox that shows them;
    returns (frustum handles, checkbox)."""
    centres = cameras.poses[:, :, 3]
    spread = float(np.linalg.norm(centres - centres.mean(0), axis=1).mean()) or 1.0
    width, height = cameras.image_size
    frusta = []
    for view in range(len(cameras.poses)):
        pose = cameras.viewer_pose(cameras.poses[view])
        thumbnail = thumbnails[view] if view < len(thumbnails) else None
        frusta.append(server.scene.add_camera_frustum(
            f"/training_cameras/{view:03d}", fov=cameras.fov_y, aspect=width / height, scale=0.08 * spread,
            thickness=0.002 * spread, image=thumbnail, format="jpeg", wxyz=quaternion_from_matrix(pose[:, :3]),
            position=pose[:, 3], color=(60, 60, 200), visible=shown))
    # A camera put at a training pose looks straight at that frustum's thumbnail: hide them to compare.
    checkbox = server.gui.add_checkbox("Show training cameras", initial_value=shown)

    def show(_) -> None:
        for frustum in frusta:
            frustum.visible = checkbox.value

    checkbox.on_update(show)
    return frusta, checkbox


class Viewer:
    """A viser server showing one model. ``output_dir`` receives saved views and camera paths."""

    def __init__(self, scene: SceneView, settings: RenderSettings, output_dir: str, host: str = "127.0.0.1",
                 port: int = 8080, training: bool = False, model_box: np.ndarray | None = None,
                 mask_box: np.ndarray | None = None) -> None:
        import viser

        check_port_free(host, port)
        # A page can close between the check that it is connected and its frame being queued;
        # viser then warns that the frame cannot be delivered, which is expected and harmless.
        warnings.filterwarnings("ignore", message="Queued a BackgroundImageMessage on a closed connection",
                                category=UserWarning)
        self.scene, self.settings, self.output_dir, self.training = scene, settings, output_dir, training
        self.server = viser.ViserServer(host=host, port=port, label="tensorf_jt", verbose=False)
        self.url = f"http://{host}:{self.server.get_port()}"  # the address bound, as it is
        self._lock = threading.Lock()
        self._clients: dict[int, ClientView] = {}
        self._next_client = 0
        self.rays_per_second = 0.0  # measured render rate (0: not yet known)
        self.model_version = 0
        self.paused = False
        self._credit = 0.0
        self._status_shown_at = 0.0
        self._setup_scene(model_box, mask_box)
        if training:
            self._setup_training_gui()
        self.server.on_client_connect(self._connect)
        self.server.on_client_disconnect(self._disconnect)

    # ------------------------------------------------------------ scene and GUI
    def _setup_scene(self, model_box: np.ndarray | None, mask_box: np.ndarray | None) -> None:
        scene, cameras = self.server.scene, self.scene.cameras
        # Nothing on the page needs light (lines, thumbnails, the frame as its background): without
        # viser's default lights, their shadow maps and its environment map, a browser drawing in
        # software loads and redraws the page with far less CPU (docs/VIEWER.md has the figures).
        scene.configure_default_lights(enabled=False, cast_shadow=False)
        scene.configure_environment_map(hdri=None)
        if cameras is None:
            scene.set_up_direction("+z")
            if model_box is not None:
                self.server.initial_camera.position = tuple(np.asarray(model_box).max(0) * 2.5)
                self.server.initial_camera.look_at = tuple(np.asarray(model_box).mean(0))
        else:
            scene.set_up_direction(cameras.up_direction())
            centre = None if model_box is None else self._to_viewer_box(model_box).mean(0)
            position, look_at = cameras.start_view(centre)
            self.server.initial_camera.position = tuple(position)
            self.server.initial_camera.look_at = tuple(look_at)
            self.server.initial_camera.up = tuple(cameras.up_direction())
            self._add_frusta(cameras)
        self.server.initial_camera.fov = self._start_fov()
        self.show_boxes(model_box, mask_box)

    def _add_frusta(self, cameras: SceneCameras) -> None:
        # While training they start hidden: every redraw of the page draws each frustum and its
        # thumbnail, which on a browser drawing in software costs more than the rest of the page.
        self.training_frusta, self.show_cameras = add_training_frusta(self.server, cameras, self.scene.thumbnails,
                                                                      shown=not self.training)

    def _to_viewer_box(self, box: np.ndarray) -> np.ndarray:
        box = np.asarray(box, dtype=np.float64).reshape(2, 3)
        if self.scene.cameras is None:
            return box
        corners = (self.scene.cameras.world_to_viewer @ box.T).T
        return np.stack([corners.min(0), corners.max(0)])

    def show_boxes(self, model_box: np.ndarray | None, mask_box: np.ndarray | None) -> None:
        """Draw the scene box (orange) and the alpha mask's box (green), those given."""
        for name, box, colour in (("scene_box", model_box, (255, 140, 0)), ("alpha_mask_box", mask_box, (0, 170, 80))):
            if box is None:
                continue
            self.server.scene.add_line_segments(f"/{name}", box_edges(self._to_viewer_box(box)), colour,
                                                thickness=1.5, thickness_units="screen")

    def _setup_training_gui(self) -> None:
        gui = self.server.gui
        with gui.add_folder("Training"):
            self._status = gui.add_markdown("waiting for the first iteration")
            self._pause_button = gui.add_button("Pause training")
        self._pause_button.on_click(lambda _: self._toggle_pause())

    def _toggle_pause(self) -> None:
        self.paused = not self.paused
        self._pause_button.label = "Resume training" if self.paused else "Pause training"

    def _connect(self, client) -> None:
        view = ClientView(client)
        gui = client.gui
        with gui.add_folder("View"):
            view.gui["output"] = gui.add_dropdown("Output", OUTPUTS, initial_value="RGB")
            view.gui["max_side"] = gui.add_slider("Max resolution", min=32, max=2048, step=16,
                                                  initial_value=DEFAULT_MAX_SIDE)
            view.gui["fov"] = gui.add_slider("FOV (degrees)", min=10.0, max=120.0, step=1.0,
                                             initial_value=round(math.degrees(self._start_fov()), 1))
            view.gui["save_view"] = gui.add_button("Save view (PNG)")
        with gui.add_folder("Camera path"):
            view.gui["keyframes"] = gui.add_markdown("0 keyframes")
            view.gui["add"] = gui.add_button("Add keyframe")
            view.gui["remove"] = gui.add_button("Remove last keyframe")
            view.gui["clear"] = gui.add_button("Clear keyframes")
            view.gui["seconds"] = gui.add_number("Seconds", initial_value=4.0, min=0.5, max=600.0, step=0.5)
            view.gui["fps"] = gui.add_number("Frames per second", initial_value=30, min=1, max=120, step=1)
            view.gui["preview"] = gui.add_slider("Preview", min=0.0, max=1.0, step=0.01, initial_value=0.0)
            view.gui["save_path"] = gui.add_button("Save camera path")
            view.gui["path_note"] = gui.add_markdown("")
        view.gui["output"].on_update(lambda _: self._set_choice(view, output=view.gui["output"].value))
        view.gui["max_side"].on_update(lambda _: self._set_choice(view, max_side=int(view.gui["max_side"].value)))
        view.gui["fov"].on_update(lambda _: self._set_fov(view))
        view.gui["save_view"].on_click(lambda _: self._save_view(view))
        view.gui["add"].on_click(lambda _: self._edit_keyframes(view, "add"))
        view.gui["remove"].on_click(lambda _: self._edit_keyframes(view, "remove"))
        view.gui["clear"].on_click(lambda _: self._edit_keyframes(view, "clear"))
        view.gui["preview"].on_update(lambda _: self._preview_path(view))
        view.gui["save_path"].on_click(lambda _: self._save_path(view))
        client.camera.on_update(lambda camera: self._camera_moved(view, camera))
        with self._lock:
            self._clients[client.client_id] = view
        self._camera_moved(view, client.camera)

    def _set_fov(self, view: ClientView) -> None:
        view.client.camera.fov = math.radians(float(view.gui["fov"].value))
        self._camera_moved(view, view.client.camera)

    def _start_fov(self) -> float:
        return self.scene.cameras.fov_y if self.scene.cameras is not None else math.radians(50.0)

    def _disconnect(self, client) -> None:
        with self._lock:
            self._clients.pop(client.client_id, None)
            if not self._clients and self.paused:  # nobody left to press resume
                self._toggle_pause()

    def _camera_moved(self, view: ClientView, camera) -> None:
        state = (np.array(camera.wxyz, dtype=np.float64), np.array(camera.position, dtype=np.float64),
                 float(camera.fov), float(camera.aspect))
        with self._lock:
            view.camera = state
            view.camera_version += 1

    def _set_choice(self, view: ClientView, **choices) -> None:
        with self._lock:
            for name, value in choices.items():
                setattr(view, name, value)

    # -------------------------------------------------------------- buttons
    def _current_camera(self, view: ClientView) -> ViewerCamera | None:
        with self._lock:
            state, max_side = view.camera, view.max_side
        if state is None:
            return None
        return camera_from_viser(*state, max_side=max_side)

    def _save_view(self, view: ClientView) -> None:
        with self._lock:
            frame, output = view.last_frame, view.output
        if frame is None:
            view.client.add_notification("Nothing to save yet", "Wait for the full-size frame.", auto_close_seconds=4)
            return
        import imageio.v3 as iio

        os.makedirs(self.output_dir, exist_ok=True)
        path = unused_path(os.path.join(self.output_dir, f"view_{time.strftime('%Y%m%d-%H%M%S')}_{output.lower()}.png"))
        iio.imwrite(path, frame)
        view.client.add_notification("View saved", path, auto_close_seconds=6)

    def _model_camera(self, camera: ViewerCamera) -> PathCamera:
        c2w = camera.c2w if self.scene.cameras is None else self.scene.cameras.model_pose(camera.c2w)
        return PathCamera(c2w=c2w, fov_y=camera.fov_y)

    def _viewer_pose(self, camera: PathCamera) -> np.ndarray:
        return camera.c2w if self.scene.cameras is None else self.scene.cameras.viewer_pose(camera.c2w)

    def _edit_keyframes(self, view: ClientView, action: str) -> None:
        camera = self._current_camera(view)
        with self._lock:
            if action == "add" and camera is not None:
                view.keyframes.append(self._model_camera(camera))
            elif action == "remove" and view.keyframes:
                view.keyframes.pop()
            elif action == "clear":
                view.keyframes.clear()
            keyframes = list(view.keyframes)
        view.gui["keyframes"].content = f"{len(keyframes)} keyframe{'s' if len(keyframes) != 1 else ''}"
        client_scene = view.client.scene
        if len(keyframes) >= 2:
            points = np.array([self._viewer_pose(k)[:, 3] for k in keyframes])
            client_scene.add_spline_catmull_rom("/camera_path", points, curve_type="catmullrom", tension=0.5,
                                                thickness=0.01 * self._path_scale(points), color=(220, 30, 30))
        else:
            client_scene.add_spline_catmull_rom("/camera_path", np.zeros((2, 3)), visible=False)

    @staticmethod
    def _path_scale(points: np.ndarray) -> float:
        return float(np.linalg.norm(points.max(0) - points.min(0))) or 1.0

    def _keyframes(self, view: ClientView) -> list[PathCamera]:
        with self._lock:
            return list(view.keyframes)

    def _preview_path(self, view: ClientView) -> None:
        keyframes = self._keyframes(view)
        if len(keyframes) < 2:
            return
        count = max(2, int(round(float(view.gui["seconds"].value) * float(view.gui["fps"].value))))
        frames = interpolate(keyframes, count)
        camera = frames[min(len(frames) - 1, int(round(float(view.gui["preview"].value) * (len(frames) - 1))))]
        pose = self._viewer_pose(camera)
        with view.client.atomic():
            view.client.camera.position = pose[:, 3]
            view.client.camera.wxyz = quaternion_from_matrix(pose[:, :3])
            view.client.camera.fov = camera.fov_y

    def _save_path(self, view: ClientView) -> None:
        keyframes = self._keyframes(view)
        if len(keyframes) < 2:
            view.client.add_notification("Add keyframes first", "A camera path needs at least two keyframes.",
                                         auto_close_seconds=5)
            return
        camera = self._current_camera(view)  # known: keyframes were taken from it
        os.makedirs(self.output_dir, exist_ok=True)
        path = unused_path(os.path.join(self.output_dir, f"camera_path_{time.strftime('%Y%m%d-%H%M%S')}.json"))
        write_camera_path(path, keyframes, camera.width, camera.height, float(view.gui["fps"].value),
                          float(view.gui["seconds"].value))
        view.gui["path_note"].content = (f"Saved `{path}`. Render it with:\n\n"
                                         f"`python render.py --ckpt CKPT --camera_path {path}`")
        view.client.add_notification("Camera path saved", path, auto_close_seconds=6)

    # ------------------------------------------------------------- rendering
    @property
    def client_count(self) -> int:
        with self._lock:
            return len(self._clients)

    def clients(self) -> list[ClientView]:
        """The connected browsers, oldest first."""
        with self._lock:
            return list(self._clients.values())

    def is_settled(self, view: ClientView) -> bool:
        """Whether ``view`` shows the full-size frame of its latest camera and choices."""
        with self._lock:
            wanted = (view.camera_version, view.output, view.max_side)
        shown = view.shown
        return (view.job is None and shown is not None and shown[1] and (shown[0], shown[3], shown[4]) == wanted
                and (not self.training or shown[2] == self.model_version))

    def model_changed(self, model_box: np.ndarray | None = None, mask_box: np.ndarray | None = None) -> None:
        """The model was updated (a training step or a grid event): frames are re-rendered, and
        the boxes redrawn where given."""
        self.model_version += 1
        if model_box is not None or mask_box is not None:
            self.show_boxes(model_box, mask_box)

    @property
    def status_text(self) -> str:
        """The training panel's text as shown."""
        return self._status.content if self.training else ""

    def show_status(self, text: str, force: bool = False) -> None:
        """The training panel's text (iteration, loss, PSNR, grid), at most every ``STATUS_EVERY_S``."""
        now = time.perf_counter()
        if self.training and (force or now - self._status_shown_at >= STATUS_EVERY_S):
            self._status.content = text
            self._status_shown_at = now

    def after_step(self, model, step_seconds: float) -> None:
        """Between training steps: render for the connected browsers within the credit the step
        earned; nothing at all when no browser is connected."""
        if self.client_count == 0:
            self._credit = 0.0
            return
        self._credit = min(self._credit + TRAINING_SHARE * step_seconds, 1.0)
        if self._credit <= 0.0:
            return
        started = time.perf_counter()
        self.service(model, self._credit)
        self._credit -= time.perf_counter() - started

    def service(self, model, seconds: float) -> bool:
        """Render pending frames for up to ``seconds`` (at least one chunk when there is work).
        Returns whether there was anything to do."""
        deadline = time.perf_counter() + seconds
        worked = False
        while True:
            view = self._next_pending()
            if view is None:
                return worked
            worked = True
            self._advance(view, model, deadline)
            if time.perf_counter() >= deadline:
                return worked

    def _next_pending(self) -> ClientView | None:
        """The next browser (round robin) whose frame is not up to date, with its job started."""
        with self._lock:
            views = list(self._clients.values())
        for offset in range(len(views)):
            view = views[(self._next_client + offset) % len(views)]
            if self._prepare_job(view):
                self._next_client = (self._next_client + offset + 1) % len(views)
                return view
        return None

    def _prepare_job(self, view: ClientView) -> bool:
        with self._lock:
            state, version, output, max_side = view.camera, view.camera_version, view.output, view.max_side
        if state is None:
            return False
        wanted = (version, output, max_side)
        job = view.job
        if job is not None and job.tag[0] == wanted:
            return True
        shown = view.shown
        moved = shown is None or shown[0] != version or shown[3] != output or shown[4] != max_side
        full_camera = camera_from_viser(*state, max_side=max_side)
        if moved:
            camera = self._sized_camera(full_camera, PREVIEW_SECONDS)
        elif shown[2] != self.model_version:  # a training model moved on: a frame it renders within LIVE_SECONDS
            if self.training and time.perf_counter() - view.sent_at < LIVE_EVERY_S:
                view.job = None
                return False
            camera = self._sized_camera(full_camera, LIVE_SECONDS) if self.training else full_camera
        elif not shown[1] and (self.paused or not self.training):
            camera = full_camera  # a learning model's full-size frame would be out of date before it is done
        else:
            view.job = None
            return False
        rays = self._rays(camera)
        full = camera.width == full_camera.width and camera.height == full_camera.height
        view.job = FrameJob(rays, camera.width, camera.height, output, tag=(wanted, full, self.model_version))
        return True

    def _sized_camera(self, camera: ViewerCamera, seconds: float) -> ViewerCamera:
        """``camera`` at the size it renders in about ``seconds`` at the measured ray rate (at
        most its own size)."""
        if self.rays_per_second <= 0:
            side = MIN_PREVIEW_SIDE * 2
        else:
            pixels = self.rays_per_second * seconds
            side = int(math.sqrt(pixels * max(camera.width, camera.height) / min(camera.width, camera.height)))
        side = max(MIN_PREVIEW_SIDE, side)
        longer = max(camera.width, camera.height)
        if side >= longer:
            return camera
        return camera.resized(max(1, round(camera.width * side / longer)), max(1, round(camera.height * side / longer)))

    def _rays(self, camera: ViewerCamera) -> np.ndarray:
        if self.scene.cameras is not None:
            return self.scene.cameras.rays(camera)
        return camera_rays(camera.height, camera.width, camera.focal, camera.c2w)  # no dataset: unit directions

    def _advance(self, view: ClientView, model, deadline: float) -> None:
        job = view.job
        done = job.advance(model, self.settings, deadline)
        if done:
            self._measure(job)
            view.job = None
            (version, output, max_side), full, model_version = job.tag
            image = job.image(self.scene.near_far)
            with self._lock:
                still_connected = view.client.client_id in self._clients
            if not still_connected:
                return
            view.client.scene.set_background_image(image, format="jpeg", jpeg_quality=90)
            view.frames_sent += 1
            view.sent_at = time.perf_counter()
            view.shown = (version, full, model_version, output, max_side)
            if full:
                with self._lock:
                    view.last_frame = image

    def _measure(self, job: FrameJob) -> None:
        if job.render_seconds <= 0:
            return
        rate = job.rays.shape[0] / job.render_seconds
        self.rays_per_second = rate if self.rays_per_second <= 0 else 0.5 * (self.rays_per_second + rate)

    def close(self) -> None:
        self.server.stop()
