"""The biLM's thinc shim: thinc's `PyTorchShim`, with each optimizer step written into the torch
parameters in place, and predictions that leave the model in eval mode.

thinc's `PyTorchShim.finish_update` runs the thinc optimizer on numpy (or cupy) views of each
parameter and its gradient, then rebinds `parameter.data` to a tensor made from the array the
optimizer returned. For the biLM that goes wrong twice (the fine-tuning tests in tests/spacy/test_spacy_training.py):

- the weights change but their version counters do not, so the inference kernel's derived copies
  (prepacked weights) and the token cache, rebuilt when a weight's (address, version) changes,
  keep serving the old weights: predictions during fine-tuning (`spacy train`'s dev scores) came
  from the biLM as it was before training;
- every step left one more tensor per parameter alive, and memory grew by about the updated
  weights' size per step (the project's NER runs fine-tuning the top layer ran the 24 GB machine
  short of memory before their 4,000 steps).

Here the optimizer updates the views in place, the result is copied back only if it is a new
array, and the version counter moves as for any in-place update. The same optimizer, the same key
per parameter (so the same Adam moments), the same skipping when a scaled gradient overflowed.
"""

from __future__ import annotations

from typing import cast

import torch
from thinc.api import ArgsKwargs, Optimizer, PyTorchShim, torch2xp, xp2torch
from thinc.types import FloatsXd


class InPlaceUpdateShim(PyTorchShim):
    """A `PyTorchShim` whose `finish_update` updates each parameter in place, and whose `predict`
    leaves the model in eval mode."""

    def predict(self, inputs: ArgsKwargs):
        """As thinc's, without putting the model back in train mode afterwards: a biLM bound to bf16
        or int8 in eval mode holds no fp32 weights (`hf.fp32_weights`), and train mode reads them
        back from its files; `begin_update` puts it in train mode when it trains."""
        self._model.eval()
        with torch.no_grad(), torch.autocast(device_type="cuda", enabled=self._mixed_precision):
            return self._model(*inputs.args, **inputs.kwargs)

    def finish_update(self, optimizer: Optimizer) -> None:
        for name, parameter in self._model.named_parameters():
            if parameter.grad is None:
                continue
            if not self._grad_scaler.found_inf:  # as thinc: no step when a scaled gradient overflowed
                # (torch2xp is typed as any array; a parameter and its gradient are floats)
                weights = cast(FloatsXd, torch2xp(parameter.detach()))  # a view of the parameter
                updated, _ = optimizer((self.id, name), weights, cast(FloatsXd, torch2xp(parameter.grad)))
                updated = xp2torch(updated, device=parameter.device)
                with torch.no_grad():
                    if updated.data_ptr() != parameter.data_ptr():
                        parameter.copy_(updated.view_as(parameter))  # bumps the version itself
                    else:
                        torch.autograd.graph.increment_version(parameter)
            parameter.grad.zero_()
        self._grad_scaler.update()


__all__ = ["InPlaceUpdateShim"]
