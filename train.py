"""Train TensoRF: ``python train.py --config configs/lego.txt`` (no arguments: the demo scene)."""
from tensorf_jt.cli.train import entry_point

if __name__ == "__main__":
    entry_point()
