"""Render a checkpoint's test views with metrics: ``python render.py --ckpt log/NAME/NAME.th``."""
import sys

from tensorf_jt.cli.render import main

if __name__ == "__main__":
    sys.exit(main())
