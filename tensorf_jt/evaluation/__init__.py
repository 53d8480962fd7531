"""Looking at a trained model: rendering test views and camera paths with metrics (PSNR, SSIM,
depth error), videos, colour-mapped depth, and mesh export."""
