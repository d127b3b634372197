"""nb.torch - a render as a torch.autograd.Function: a loss on nb's images backpropagates into
named parameter tensors through nb's analytic derivatives.

    import torch, nb, nb.torch
    r = nb.Renderer(["-cell", 100, 100, 100, 90, 90, 90, "-lambda", 6.2, "-N", 5, "-detpixels", 256,
                     "-default_F", 100])
    distance = torch.tensor(100.0, dtype=torch.float64, requires_grad=True)
    image = nb.torch.render(r, {"distance": distance})        # (panels, slow, fast)
    loss = ((image - observed) ** 2).sum()
    loss.backward()                                           # distance.grad

The backward pass is the vector-Jacobian product, sum over pixels of grad_output x d image / d p,
formed in C (nb_render_frame_vjp): no graph over pixels is built and no image of derivatives is
kept, so memory stays at a few images whatever the parameters (the renderer keeps one float64 copy
of grad_output, the engine's weights, for the next backward).  A NaN in grad_output gives NaN
gradients, as torch's own functions do (nb.Renderer.vjp refuses one).

Which kernel path a dtype selects:
  float64 tensors: the reference-faithful double path, in double (images and derivatives as the
                   engine computes them, before nb-sim's rounding to float), on the CPU;
  float32 tensors: the renderer's precision (Renderer(precision=...): "plan" by default, the fast
                   single path unless the plan says -precision double), nb-sim's float image and
                   nb-sim --grad's derivatives, on the renderer's device (CPU or CUDA); the
                   product is still added in double.
Start the tensors from the plan's own values (Renderer.get): a triclinic cell's angles read back
slightly off -cell's (84.99447 for -cell ... 85 95 100: the crystal nanoBragg builds has them), and
a tensor of the flag's nominal 85 would move the crystal.  Every parameter tensor of one call has
one dtype; the image comes back in it, on the parameters'
torch device.  Parameters not given keep the renderer's plan values.  A render moves the renderer's
plan to the values given (nb.Renderer.set), and its backward sets them again, so one renderer may
serve several graphs in turn (not at once from several threads).
"""
import numpy as np
import torch

from . import Renderer, _names_arg

__all__ = ["render", "Render"]


def _frames_arg(frames):
    if frames is None:
        return [0], True
    if isinstance(frames, (int, np.integer)) and not isinstance(frames, bool):
        return [int(frames)], True
    frames = [int(f) for f in frames]
    if not frames:
        raise ValueError("frames: none given")
    return frames, False


def _weights(renderer, grad_output):
    """grad_output as float64 on the CPU, the engine's weights, in the renderer's kept buffer
    (Renderer._kept_weights); torch's copy_ takes any strides, dtype or device."""
    weights = renderer._kept_weights(grad_output.numel()).reshape(tuple(grad_output.shape))
    torch.from_numpy(weights).copy_(grad_output.detach())
    return weights


class Render(torch.autograd.Function):
    """forward(renderer, names, frames, *values): the frames' images (frames x panels x slow x fast)
    with names set to values (0-d tensors); backward: each value's gradient from the engine's
    vector-Jacobian product.  Use render() rather than this directly."""

    @staticmethod
    def forward(ctx, renderer, names, frames, *values):
        dtype = values[0].dtype
        np_dtype = np.float64 if dtype == torch.float64 else np.float32
        plain = [float(v.detach().cpu()) for v in values]
        for name, value in zip(names, plain):
            renderer.set(name, value)
        # each frame rendered into its place: no copy of the images
        images = np.empty((len(frames),) + renderer.shape, dtype=np_dtype)
        for i, frame in enumerate(frames):
            renderer.render(frame, dtype=np_dtype, out=images[i])
        ctx.renderer, ctx.names, ctx.frames, ctx.plain = renderer, names, frames, plain
        ctx.np_dtype, ctx.dtype, ctx.device = np_dtype, dtype, values[0].device
        return torch.from_numpy(images).to(values[0].device)

    @staticmethod
    def backward(ctx, grad_output):
        renderer = ctx.renderer
        for name, value in zip(ctx.names, ctx.plain):  # the plan forward rendered
            renderer.set(name, value)
        weights = _weights(renderer, grad_output)
        totals = dict.fromkeys(ctx.names, 0.0)
        for i, frame in enumerate(ctx.frames):
            for name, value in renderer._vjp(weights[i], ctx.names, frame, ctx.np_dtype).items():
                totals[name] += value
        grads = [torch.tensor(totals[n], dtype=ctx.dtype, device=ctx.device) if ctx.needs_input_grad[3 + j]
                 else None for j, n in enumerate(ctx.names)]
        return (None, None, None, *grads)


def render(renderer, params, frames=None):
    """The renderer's image with params (a dict of parameter name -> 0-d tensor, in the names' units:
    nb.parameter_unit) set, differentiable with respect to each tensor that requires grad.

    frames: None or an int: that frame (0 for None), a tensor (panels, slow, fast); a list: those
    frames, (len(frames), panels, slow, fast).  The panels must share a size (Renderer.shape)."""
    if not isinstance(renderer, Renderer):
        raise TypeError("renderer: expected an nb.Renderer, got %s" % type(renderer).__name__)
    if renderer.shape is None:
        raise ValueError("renderer: its panels differ in size; nb.torch renders detectors of equal panels")
    if not isinstance(params, dict) or not params:
        raise TypeError("params: expected a dict of parameter name -> 0-d tensor, with at least one")
    names = _names_arg(list(params))
    values = []
    for name in names:
        value = params[name]
        if not isinstance(value, torch.Tensor):
            raise TypeError("params[%r]: expected a torch tensor, got %s" % (name, type(value).__name__))
        if value.numel() != 1:
            raise ValueError("params[%r]: %d elements, expected one" % (name, value.numel()))
        if value.dtype not in (torch.float32, torch.float64):
            raise TypeError("params[%r]: dtype %s, expected float32 or float64" % (name, value.dtype))
        if not torch.isfinite(value).all():
            raise ValueError("params[%r]: %s is not a finite number" % (name, float(value)))
        values.append(value.reshape(()))
    if len({v.dtype for v in values}) != 1:
        raise TypeError("params: mixed dtypes (%s); give every tensor one dtype" %
                        ", ".join(sorted({str(v.dtype) for v in values})))
    frame_list, single = _frames_arg(frames)
    images = Render.apply(renderer, names, frame_list, *values)
    return images[0] if single else images
