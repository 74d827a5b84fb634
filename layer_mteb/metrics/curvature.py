"""Curvature of a prompt's trajectory through representation space: how sharply it turns from token to token.

With z_1 … z_T the token states of one prompt and v_k = z_{k+1} − z_k, curvature is the mean over k of the angle
arccos(cos(v_k, v_{k+1})) in radians: 0 for a straight line, π for a path that doubles back. The authors' code took
|cos| (angles folded into [0, π/2]); ``absolute=True`` reproduces that.
"""

from __future__ import annotations

import torch

_RELATIVE_TOL = 1e-10


def token_curvatures(
    hidden: torch.Tensor, mask: torch.Tensor, *, absolute: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Curvature of every prompt of a right-padded batch: ``hidden`` [B, T, D], ``mask`` [B, T] -> (values, valid).

    A step of length zero (two identical consecutive states) has no direction, so the angles it takes part in are
    skipped. Prompts with fewer than 3 real tokens, or no angle left, are not valid; their value is a 0 placeholder.
    """
    z = hidden.double() * mask.unsqueeze(-1).to(torch.float64)
    steps = z[:, 1:] - z[:, :-1]
    lengths = steps.norm(dim=-1)
    scale = z.norm(dim=-1).amax(dim=-1, keepdim=True)
    real_steps = mask[:, 1:].bool() & mask[:, :-1].bool() & (lengths > _RELATIVE_TOL * scale)
    cosine = (steps[:, :-1] * steps[:, 1:]).sum(-1) / (lengths[:, :-1] * lengths[:, 1:]).clamp(min=1e-300)
    if absolute:
        cosine = cosine.abs()
    angles = torch.arccos(cosine.clamp(-1.0, 1.0))
    pairs = real_steps[:, :-1] & real_steps[:, 1:]
    count = pairs.sum(dim=-1)
    total = torch.where(pairs, angles, torch.zeros_like(angles)).sum(dim=-1)
    valid = count > 0
    return torch.where(valid, total / count.clamp(min=1), torch.zeros_like(total)), valid


def curvature(z: torch.Tensor, *, absolute: bool = False) -> float:
    """Mean turning angle (radians) of one trajectory ``z`` [T, D]; needs at least 3 states and 2 non-zero steps."""
    if z.ndim != 2:
        raise ValueError(f"expected a trajectory [T, D], got shape {tuple(z.shape)}")
    if z.shape[0] < 3:
        raise ValueError(f"curvature needs at least 3 token states (two steps), got {z.shape[0]}")
    if not bool(torch.isfinite(z).all()):
        raise ValueError("representations contain NaN or inf; try --dtype float32")
    mask = torch.ones(1, z.shape[0], dtype=torch.bool, device=z.device)
    values, valid = token_curvatures(z.unsqueeze(0), mask, absolute=absolute)
    if not bool(valid[0]):
        raise ValueError("curvature is undefined: no two consecutive non-zero steps in the trajectory")
    return float(values[0])
