"""tools/patch_jittor.py: Jittor's kernel tuners under one mutex, in the source and in the core
this process runs; and the parallel op compiler still builds tuned products correctly."""
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import jittor as jt

from conftest import REPO_ROOT, run_python
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


def test_the_running_jittor_core_was_built_from_the_patched_source():
    assert patch_jittor.is_patched(patch_jittor.jittor_source().read_text(encoding="utf-8"))
    cores = list(Path(jt.compiler.cache_path).glob("jittor_core*.so"))
    assert cores, jt.compiler.cache_path
    assert all(b"tuner_mutex" in core.read_bytes() for core in cores)


PRODUCTS = '''
import sys, time
import numpy as np
import tensorf_jt.runtime
import jittor as jt
tensorf_jt.runtime.setup()
jt.flags.cc_flags = jt.flags.cc_flags + f" -DTENSORF_JT_TEST_NONCE={time.time_ns()} "
rng = np.random.default_rng(0)
weight = rng.standard_normal((12, 12)).astype(np.float32)
shared = jt.array(weight)
outs, expected = [], []
for i, name in enumerate(["exp", "sin", "cos", "tanh", "abs", "floor"]):
    x = rng.standard_normal((8 + i, 12)).astype(np.float32)
    for transposed in (False, True):
        product = jt.matmul(jt.array(x), shared.transpose() if transposed else shared) * 0.1
        outs.append(getattr(jt, name)(product))
        expected.append(getattr(np, name)((x @ (weight.T if transposed else weight)) * 0.1))
jt.sync(outs)
assert all(np.allclose(o.numpy(), e, rtol=1e-4, atol=1e-4) for o, e in zip(outs, expected))
print("PRODUCTS_OK")
'''


def test_a_batch_of_tuned_products_sharing_a_weight_compiles_in_parallel(tmp_path):
    """Twelve products of one weight, each kernel new (a nonce in the flags), compiled by the
    parallel op compiler with their matmul tuners taking turns."""
    script = tmp_path / "products.py"
    script.write_text(PRODUCTS)
    started = time.time()
    result = run_python([str(script)], timeout=300)
    assert result.returncode == 0 and "PRODUCTS_OK" in result.stdout, result.stderr[-3000:]
    assert time.time() - started < 120
