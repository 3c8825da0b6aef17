"""Leaf utilities every layer may use: safe output paths and atomic writes, progress bars."""
