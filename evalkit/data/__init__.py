"""What comes in: the strict fixture schema, the fixture loader and readers of outside formats.

Modules here import nothing from ``evalkit.retrieval``, ``evalkit.reporting`` or the runner and front doors.
"""
