"""Labelled images for the Vision Transformer: sources, augmentation and batches."""
