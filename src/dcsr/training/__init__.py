"""Training bi-encoders: DPR's and DCSR's samples, the training loop (``loop.Trainer``) under
torchrun/DDP, and the fingerprint that tells a checkpoint's resume from a stale one.
"""
