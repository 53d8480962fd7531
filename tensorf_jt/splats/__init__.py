"""A trained checkpoint as 3D Gaussian splats, which splat viewers draw in real time.

``camera`` (pinhole cameras in OpenCV axes), ``params`` (splats as trainable Vars),
``rasterizer`` (the fused tile rasteriser or its plain-Jittor reference), ``sh`` (colour
harmonics), ``field_probe`` (the checkpoint's field at world points), ``placement`` (splats
seeded where the field's surfaces are), ``refine`` (their optimisation against the
checkpoint's renders) and ``export`` (the pipeline ``tensorf-export-splats`` runs). The file
format is ``formats.gaussian_ply``'s.
"""
