"""tools/gpu_check.sh's flow on the CPU (its dry-run knobs): scene, training, table, logs. GPU
time is scarce, so the script is kept working by running it here on every test run."""
import json
import os
import subprocess
import sys
import tarfile

from conftest import REPO_ROOT


def test_the_gpu_check_trains_ours_and_reports_on_the_cpu(tmp_path):
    from tensorf_jt.bootstrap import CHOSEN_ENV
    from tensorf_jt.dataLoader.demo_scene import DemoSceneSpec, ensure_generated

    room = tmp_path / "room"
    ensure_generated(str(room), DemoSceneSpec(image_size=16, n_train=6, n_val=1, n_test=2, room=True))
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in CHOSEN_ENV}
    env.update(TENSORF_JT_CPU="1", SKIP_INSTALL="1", PYTHON=sys.executable, ORIGINAL="none", SCRATCH=str(tmp_path),
               OUT=str(out), SCENE_SIZE="16", ITERS="12", PROFILE_STEPS="1", DEADLINE="500",
               ROOM=str(room), ROOM_ITERS="20", ROOM_FLAGS="--batch_size 256 --N_voxel_init 4096 --N_voxel_final 32768",
               LEGO_FLAGS="--N_voxel_init 32768", OP_PROFILE_STEPS="2")
    done = subprocess.run(["bash", str(REPO_ROOT / "tools" / "gpu_check.sh"), "check"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

    results = json.loads((out / "train_speed.json").read_text())
    assert [r["implementation"] for r in results] == ["tensorf_jt (fused)"]
    result = results[0]
    assert result["iterations"] == 12 and result["use_cuda"] == 0 and result["final_grid_s_per_iter"] > 0
    assert result["test_psnr"] > 0 and set(result["stages_ms"]) >= {"field", "backward", "optimizer"}
    assert result["final_grid"] == [32, 32, 32]  # LEGO_FLAGS reached the trainer
    ops = result["ops_ms"]
    assert 0 < len(ops) <= 15 and all(op["count"] >= 1 and op["ms"] >= 0 for op in ops)
    assert [op["ms"] for op in ops] == sorted((op["ms"] for op in ops), reverse=True)
    log = (out / "gpu_check.log").read_text()
    assert "| operator (tensorf_jt (fused), Jittor's profiler) | calls per step | ms per step |" in log
    assert "| tensorf_jt (fused) |" in log and "Jittor is ready: JITTOR_READY 0" in log
    assert "104 views of 16x16" in log
    with tarfile.open(out / "logs.tar.gz") as logs:
        names = logs.getnames()
    assert "gpu_check_logs/train_speed/tensorf_jt_fused.log" in names and "gpu_check_logs/scene.log" in names
    assert (tmp_path / "gpu_check_work" / "runs" / "speed_fused" / "speed_fused.th").is_file()

    # the room, unbounded then bounded, on the same grid schedule
    for mode in ("unbounded", "bounded"):
        assert f"the built-in room ({room}), {mode} mode" in log
        [room_result] = json.loads((out / f"room_{mode}.json").read_text())
        assert room_result["iterations"] == 20 and room_result["use_cuda"] == 0
        if mode == "unbounded":  # contracted space is a cube: ROOM_FLAGS' 32,768 voxels (below the
            assert room_result["final_grid"] == [32, 32, 32]  # 16-pixel room's cap, 37,037) end as 32^3
    checkpoint = tmp_path / "gpu_check_work" / "room_runs_unbounded" / "speed_fused" / "speed_fused.th"
    assert checkpoint.is_file()
