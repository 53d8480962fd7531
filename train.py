"""Train TensoRF: ``python train.py --config configs/lego.txt`` (no arguments: the demo scene)."""
import sys

from tensorf_jt.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
