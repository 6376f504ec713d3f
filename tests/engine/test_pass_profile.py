"""The pass profiler of the update benchmark: kernel kinds by name, and only the second call profiled."""

from __future__ import annotations

import pytest

from cpmobius.engine import pass_profile


@pytest.mark.parametrize(
    "kernel, kind",
    [  # names from a profile of the Player's update on an H200
        ("nvjet_sm90_tst_128x272_64x4_2x1_v_bz_coopA_TNT", "matrix products"),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false>>", "attention"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x128", "attention"),
        ("Memcpy HtoD (Pinned -> Device)", "copies"),
        ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", "communication"),
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>",
            "softmax / log-softmax",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
            "elementwise and other",
        ),
    ],
)
def test_kernels_are_sorted_by_kind(kernel, kind):
    assert pass_profile.kernel_kind(kernel) == kind


def test_only_the_second_call_is_profiled(tmp_path):
    import torch

    calls = []

    def matmul(n):
        calls.append(n)
        return torch.randn(n, n) @ torch.randn(n, n)

    wrapped = pass_profile.profiled(matmul, "update", str(tmp_path))
    wrapped(4)
    assert list(tmp_path.iterdir()) == []  # the warm-up call is left alone
    assert wrapped(8).shape == (8, 8)
    wrapped(4)
    (report,) = tmp_path.iterdir()
    assert report.name.startswith("update_") and calls == [4, 8, 4]
    text = report.read_text()
    assert text.startswith("pass update: wall ") and "aten::mm" in text
