"""Image quality metrics, computed in numpy on [H, W, 3] images in [0, 1]."""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def mse_to_psnr(mse: float) -> float:
    """Peak signal-to-noise ratio in dB of images in [0, 1], from their mean squared error."""
    return -10.0 * math.log10(max(mse, 1e-12))


def psnr(image: np.ndarray, reference: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB."""
    diff = np.asarray(image, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    return mse_to_psnr(float(np.mean(diff * diff)))


def gaussian_kernel(size: int = 11, sigma: float = 1.5) -> np.ndarray:
    """Normalised 1-D Gaussian filter taps."""
    half = size // 2
    offsets = np.arange(size) - half + (2 * half - size + 1) / 2
    taps = np.exp(-0.5 * (offsets / sigma) ** 2)
    return taps / taps.sum()


def _blur_valid(channel: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """Separable 'valid' convolution of a 2-D array with ``taps`` along both axes."""
    flipped = taps[::-1]
    rows = sliding_window_view(channel, taps.size, axis=0) @ flipped
    return sliding_window_view(rows, taps.size, axis=1) @ flipped


def ssim(image: np.ndarray, reference: np.ndarray, max_val: float = 1.0,
         filter_size: int = 11, filter_sigma: float = 1.5, k1: float = 0.01, k2: float = 0.03) -> float:
    """Structural similarity as the reference computes it (mip-NeRF's formulation).

    Gaussian window 11x11 with sigma 1.5 applied per channel without padding; variances are
    clipped to be non-negative and the covariance to their geometric mean.
    """
    image = np.asarray(image, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if image.shape != reference.shape or image.ndim != 3:
        raise ValueError(f"ssim needs two [H, W, C] images of one shape, got {image.shape} and {reference.shape}")
    taps = gaussian_kernel(filter_size, filter_sigma)

    def blur(z: np.ndarray) -> np.ndarray:
        return np.stack([_blur_valid(z[..., c], taps) for c in range(z.shape[-1])], axis=-1)

    mu0, mu1 = blur(image), blur(reference)
    sigma00 = np.maximum(0.0, blur(image * image) - mu0 * mu0)
    sigma11 = np.maximum(0.0, blur(reference * reference) - mu1 * mu1)
    sigma01 = blur(image * reference) - mu0 * mu1
    sigma01 = np.sign(sigma01) * np.minimum(np.sqrt(sigma00 * sigma11), np.abs(sigma01))
    c1, c2 = (k1 * max_val) ** 2, (k2 * max_val) ** 2
    numerator = (2 * mu0 * mu1 + c1) * (2 * sigma01 + c2)
    denominator = (mu0 * mu0 + mu1 * mu1 + c1) * (sigma00 + sigma11 + c2)
    return float(np.mean(numerator / denominator))


def mean_abs_depth_error(depth: np.ndarray, reference: np.ndarray) -> float:
    """Mean |depth - reference| over pixels where the reference sees a surface (reference > 0)."""
    foreground = reference > 0
    if not foreground.any():
        return float("nan")
    return float(np.mean(np.abs(depth[foreground] - reference[foreground])))
