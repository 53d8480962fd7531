"""Volume rendering pieces the models are built from: rays and NDC, sampling along rays, grid
interpolation, alpha compositing, the alpha grid that skips empty space, and float32 helpers
that follow torch's arithmetic bit for bit."""
