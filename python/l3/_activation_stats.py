"""The accounting of `compress_activations`: tensors saved, coded and kept, bytes held and
their peaks, seconds spent (`compress_activations.stats`)."""

import threading
from typing import Any, Dict


class ActivationStats:
    """What the hooks hold and did (see the module documentation)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.saved = 0  # tensors packed (after deduplication)
        self.compressed = 0  # of them, coded (within a bound, or exact in fewer bytes)
        self.exact = 0  # of them, kept as they came
        self.raw_bytes = 0  # bytes of every packed tensor, summed
        self.stored_bytes = 0  # bytes kept for them, summed
        self.live_raw = 0
        self.live_stored = 0
        self.peak_raw = 0
        self.peak_stored = 0
        self.gpu_encoded = 0  # of the compressed, encoded by l3's GPU encoder
        self.encode_seconds = 0.0
        self.decode_seconds = 0.0

    def _add(self, raw: int, stored: int) -> None:
        with self._lock:
            self.live_raw += raw
            self.live_stored += stored
            self.peak_raw = max(self.peak_raw, self.live_raw)
            self.peak_stored = max(self.peak_stored, self.live_stored)

    def reset_peaks(self) -> None:
        """Peaks from now on start at what is held now."""
        with self._lock:
            self.peak_raw, self.peak_stored = self.live_raw, self.live_stored

    def as_dict(self) -> Dict[str, Any]:
        with self._lock:
            return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __repr__(self) -> str:
        return f"ActivationStats({self.as_dict()})"
