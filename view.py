"""Serve a checkpoint in the browser viewer: ``python view.py --ckpt log/NAME/NAME.th``."""
from tensorf_jt.cli.view import entry_point

if __name__ == "__main__":
    entry_point()
