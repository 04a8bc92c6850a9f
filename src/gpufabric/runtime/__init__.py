"""The serve process's background loops and telemetry."""
