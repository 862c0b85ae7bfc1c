"""The ears: voice activity detection, endpointing and incremental speech recognition."""
