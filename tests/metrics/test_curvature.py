"""Curvature: 0 on a straight line, the known angle on a zig-zag, the authors' |cos| variant, and padding."""

from __future__ import annotations

import math

import pytest
import torch

from layer_mteb.metrics.representation import curvature, token_curvatures


def test_straight_line_has_zero_curvature() -> None:
    direction = torch.tensor([1.0, -2.0, 0.5, 3.0])
    steps = torch.tensor([0.0, 1.0, 2.5, 3.0, 7.0, 7.5]).unsqueeze(1)  # uneven steps, same direction
    assert curvature(steps * direction + 4.0) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("degrees", [30.0, 60.0, 90.0, 135.0])
def test_zig_zag_turns_by_its_angle(degrees: float) -> None:
    # Alternate between two unit steps separated by `degrees`: every turn is exactly that angle.
    theta = math.radians(degrees)
    a, b = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([math.cos(theta), math.sin(theta), 0.0])
    points = [torch.zeros(3)]
    for k in range(8):
        points.append(points[-1] + (a if k % 2 == 0 else b))
    path = torch.stack(points)
    assert curvature(path) == pytest.approx(theta, abs=1e-6)
    assert curvature(path, absolute=True) == pytest.approx(min(theta, math.pi - theta), abs=1e-6)


def test_doubling_back_is_pi() -> None:
    path = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
    assert curvature(path) == pytest.approx(math.pi)
    assert curvature(path, absolute=True) == pytest.approx(0.0, abs=1e-6)


def test_batched_with_padding_equals_one_at_a_time() -> None:
    generator = torch.Generator().manual_seed(0)
    lengths = [6, 2, 3, 9, 1]
    hidden = torch.randn(len(lengths), 9, 5, generator=generator)
    mask = torch.tensor([[1] * n + [0] * (9 - n) for n in lengths])
    hidden[mask == 0] = 50.0
    values, valid = token_curvatures(hidden, mask)
    assert valid.tolist() == [True, False, True, True, False]
    for row, n in enumerate(lengths):
        if n >= 3:
            assert float(values[row]) == pytest.approx(curvature(hidden[row, :n]), abs=1e-12)
    assert torch.isfinite(values).all()


def test_repeated_states_skip_the_undefined_angles() -> None:
    path = torch.tensor([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0], [2.0, 0.0], [2.0, 1.0]])
    # steps: (1,0), (0,0), (1,0), (0,1): only the last pair has two real steps -> 90°
    assert curvature(path) == pytest.approx(math.pi / 2)


def test_clear_errors() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        curvature(torch.randn(2, 4))
    with pytest.raises(ValueError, match="NaN"):
        curvature(torch.tensor([[0.0, 1.0], [float("nan"), 0.0], [1.0, 1.0]]))
    with pytest.raises(ValueError, match="undefined"):
        curvature(torch.ones(4, 3))
