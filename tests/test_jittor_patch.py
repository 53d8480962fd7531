"""tools/patch_jittor.py, the opt-in patch that runs Jittor's kernel tuners under one mutex: the
edit of the source text, its idempotence and revert, its refusal of another Jittor, and the
command line on a copy of the file (the installed Jittor is not touched)."""
import subprocess
import sys

from conftest import REPO_ROOT
from tools import patch_jittor

PRISTINE = ("#include \"opt/tuner/matmul_tuner.h\"\n" + patch_jittor.INCLUDE_ANCHOR + "\nnamespace jittor {\n"
            "string TunerManager::tune() {\n    PassManager pm(oc);\n    if (!enable_tuner) return src;\n\n"
            + patch_jittor.TUNERS + "\n    return src;\n}\n}\n")


def test_the_tuners_are_locked_once_and_the_patch_is_idempotent():
    patched = patch_jittor.patched_text(PRISTINE)
    assert patched.count("#include <mutex>") == 1
    assert patched.count("std::lock_guard<std::mutex> tuner_lock(tuner_mutex);") == 1
    lock = patched.index("tuner_lock(tuner_mutex)")
    tuners = [patched.index(f"run_tuner<{name}>") for name in ("ReorderTuner", "MatmulTuner", "ConvTuner")]
    closing = patched.index("    }\n", lock)
    assert all(lock < position < closing for position in tuners)
    assert patch_jittor.patched_text(patched) == patched
    assert patch_jittor.original_text(patched) == PRISTINE
    assert patch_jittor.original_text(PRISTINE) == PRISTINE


def test_another_jittors_source_is_refused_with_the_version_to_install():
    try:
        patch_jittor.patched_text(PRISTINE.replace("run_tuner<ConvTuner>(&pm);", "run_tuner<ConvTuner>(&pm, 1);"))
    except patch_jittor.PatchError as error:
        assert "Jittor 1.3.11" in str(error) and "jittor==1.3.11" in str(error)
    else:
        raise AssertionError("an unknown tuner_manager.cc was patched")


def test_the_command_line_patches_checks_and_reports_a_missing_jittor(tmp_path):
    source = tmp_path / "jittor" / patch_jittor.TUNER_SOURCE
    source.parent.mkdir(parents=True)
    source.write_text(PRISTINE)
    tool = [sys.executable, str(REPO_ROOT / "tools" / "patch_jittor.py"), "--site", str(tmp_path)]

    def run(*extra):
        return subprocess.run([*tool, *extra], capture_output=True, text=True, timeout=60)

    assert run("--check").returncode == 1
    first, second = run(), run()
    assert (first.returncode, second.returncode) == (0, 0)
    assert first.stdout.strip().endswith(": patched") and second.stdout.strip().endswith(": already patched")
    assert run("--check").returncode == 0
    assert patch_jittor.is_patched(source.read_text())
    reverted = run("--revert")
    assert reverted.returncode == 0 and reverted.stdout.strip().endswith(": reverted")
    assert source.read_text() == PRISTINE and run("--check").returncode == 1
    missing = subprocess.run([*tool[:2], "--site", str(tmp_path / "nowhere")], capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: ") and "tuner_manager.cc' does not exist" in missing.stderr
