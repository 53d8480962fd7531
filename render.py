"""Render a checkpoint's test views with metrics: ``python render.py --ckpt log/NAME/NAME.th``."""
from tensorf_jt.cli.render import entry_point

if __name__ == "__main__":
    entry_point()
