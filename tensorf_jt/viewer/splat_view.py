"""A splat file in the browser: viser's own Gaussian-splatting renderer draws every frame on the
page, so the server renders nothing after sending the splats once. The training cameras are
shown as the checkpoint viewer shows them, where the scene is given.

viser draws each splat with one colour (the constant term of its harmonics) and its covariance;
the splats are moved into the viewer's world (``viewer.cameras``) with the cameras.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from tensorf_jt.formats.gaussian_ply import Splats
from tensorf_jt.viewer.server import SceneView, add_training_frusta, check_port_free


class SplatViewer:
    """A viser server showing ``splats`` (and ``scene``'s training cameras, where given)."""

    def __init__(self, splats: Splats, scene: SceneView | None, host: str = "127.0.0.1", port: int = 8080) -> None:
        import viser

        check_port_free(host, port)
        warnings.filterwarnings("ignore", message=".*experimental.*", category=UserWarning)
        self.server = viser.ViserServer(host=host, port=port, label="tensorf_jt splats", verbose=False)
        self.url = f"http://{host}:{self.server.get_port()}"
        scene_api = self.server.scene
        scene_api.configure_default_lights(enabled=False, cast_shadow=False)
        scene_api.configure_environment_map(hdri=None)
        cameras = scene.cameras if scene is not None else None
        to_viewer = cameras.world_to_viewer if cameras is not None else np.eye(3)
        centres = splats.means.astype(np.float64) @ to_viewer.T
        covariances = to_viewer @ splats.covariances() @ to_viewer.T
        scene_api.add_gaussian_splats("/splats", centers=centres.astype(np.float32),
                                      covariances=covariances.astype(np.float32),
                                      rgbs=splats.rgb().astype(np.float32),
                                      opacities=splats.opacities().astype(np.float32)[:, None])
        middle = np.median(centres, axis=0)
        initial = self.server.initial_camera
        if cameras is None:
            scene_api.set_up_direction("+z")
            reach = float(np.percentile(np.linalg.norm(centres - middle, axis=1), 90)) or 1.0
            initial.position = tuple(middle + reach * np.array([1.5, 1.5, 1.0]))
            initial.look_at = tuple(middle)
            initial.fov = math.radians(50.0)
        else:
            scene_api.set_up_direction(cameras.up_direction())
            position, look_at = cameras.start_view(middle)
            initial.position, initial.look_at = tuple(position), tuple(look_at)
            initial.up = tuple(cameras.up_direction())
            initial.fov = cameras.fov_y
            self.training_frusta, self.show_cameras = add_training_frusta(self.server, cameras, scene.thumbnails)

    def close(self) -> None:
        self.server.stop()
