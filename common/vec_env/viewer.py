"""A minimal window that shows RGB arrays (render mode "human" of vec envs), drawn with pygame."""

from __future__ import annotations

import numpy as np


class ImageViewer:
    """Shows an (H, W, 3) uint8 image in a window that resizes to it."""

    def __init__(self, caption: str = "VecEnv") -> None:
        try:
            import pygame
        except ImportError as e:  # pragma: no cover - pygame ships with gymnasium[classic-control]
            raise ImportError("render('human') needs pygame: pip install pygame-ce, "
                              "or use render('rgb_array')") from e
        self._pygame = pygame
        pygame.display.init()
        pygame.display.set_caption(caption)
        self._screen = None

    def imshow(self, image: np.ndarray) -> None:
        """Display ``image`` and process window events."""
        pygame = self._pygame
        h, w = image.shape[:2]
        if self._screen is None or self._screen.get_size() != (w, h):
            self._screen = pygame.display.set_mode((w, h))
        surface = pygame.surfarray.make_surface(np.ascontiguousarray(image[..., :3].swapaxes(0, 1)))
        self._screen.blit(surface, (0, 0))
        pygame.event.pump()
        pygame.display.flip()

    def close(self) -> None:
        """Close the window."""
        self._pygame.display.quit()
