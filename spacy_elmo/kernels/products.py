"""How each matrix product of the biLM computes at inference: the one decider, and the weights it
converts.

`decide_product` says, from plain values (the precision bound, the device type, the product's input
count K, the rows of a call where they matter, the weight's bytes, and what the device can do:
`Capabilities`), what a product multiplies in ("fp32", "bf16", "int8") and with which kernel:

* "int8": torch's quantized dynamic linear, weights packed once (`kernels.int8`);
* "onednn": oneDNN's linear (`mkldnn._linear_pointwise`), in fp32 or bf16 (bf16 weights prepacked
  once, `kernels.bf16`; fp32 weights prepacked or plain by the shape rules of `packed_lstm` and
  `linear`, all exact);
* "torch": torch's own product (MKL on a CPU, cuBLAS on CUDA), in fp32 or bf16.

The rules, in order: a precision the device cannot speed up is exact fp32 (`Capabilities`, after one
warning line, `capabilities.bf16_products` / `int8_products`); int8 only on a CPU, and only for
products of at least `MIN_INT8_INPUTS` inputs (fewer ran no faster in int8, and stay exact); a
one-row product (a recurrence step of one sentence) of a weight of at most `ONE_ROW_FP32_MAX_BYTES`
stays fp32 through MKL: one row of a cache-sized weight gains nothing from int8 or bf16, while
quantizing or converting the row (and torch's quantized linear serializing the two direction
threads) made small's batch-1 biLSTM ~1.7x slower than fp32 (small: 2 MiB and 0.5 MiB weights;
original's 32 and 8 MiB keep their low-precision products, int8 ~6x fp32 at one row there;
measured on the AMD EPYC of docs/performance.md). fp32 is within every bound.

The model asks once per product when a precision is bound (`modeling_elmo.ElmoModel.set_precision`,
and loading): each linear layer, the char CNN's product over the widest windows, the LSTM's three
weights. The recurrent products' rows change from step to step: their weights keep the decider's
answers for one row and for several (`RowProducts`), and the packed LSTM picks by the step's rows.

A module whose weights' products are all low precision can hold them in that form only
(`ConvertsWeights`: the fp32 weight is released, `hf.fp32_weights` brings it back from the model's
files); `convert` makes that form, and the kernels make the same form for a module that keeps its
fp32 weights (a derived-weight cache, rebuilt when the weight changes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

import torch
from torch import nn

from . import bf16 as bf16_kernel
from . import int8 as int8_kernel
from .capabilities import bf16_products, int8_products, onednn_linear_available
from .weights import DerivedWeights, weights_key

Dtype = Literal["fp32", "bf16", "int8"]
Kernel = Literal["torch", "onednn", "int8"]

# products with fewer inputs (K) stay fp32 under int8: int8 and fp32 took the same time there (within
# noise, 1 and 32 rows, K = 16 to 64, on the EPYC of docs/performance.md), and the fp32 product is exact
MIN_INT8_INPUTS = 64
# one-row products of a weight of at most this many bytes (fp32, one direction) stay fp32 (see above)
ONE_ROW_FP32_MAX_BYTES = 4 * 2**20


class Product(NamedTuple):
    """How one matrix product computes: what its operands are multiplied in, and by which kernel."""

    dtype: Dtype
    kernel: Kernel

    @property
    def low(self) -> bool:
        """Whether it is a low-precision product (bf16 or int8)."""
        return self.dtype != "fp32"


EXACT = Product("fp32", "torch")  # what an unbound module computes: the definition's product


class Capabilities(NamedTuple):
    """What the decider needs to know of a device: whether it multiplies bf16 natively, int8 faster
    than fp32, and has oneDNN's linear (a CPU)."""

    native_bf16: bool
    int8: bool
    onednn: bool


def device_capabilities(precision: str, device_type: str) -> Capabilities:
    """`Capabilities` of `device_type` from `kernels.capabilities`, asking only what `precision` uses:
    a device without it warns once (one line) for the precision requested, and computes fp32."""
    return Capabilities(
        native_bf16=precision == "bf16" and bf16_products(device_type),
        int8=precision == "int8" and int8_products(device_type),
        onednn=device_type == "cpu" and onednn_linear_available(),
    )


def decide_product(
    precision: str,
    device_type: str,
    inputs: int,
    rows: int | None = None,
    weight_bytes: int | None = None,
    *,
    capabilities: Capabilities,
) -> Product:
    """How a product of `inputs` (K) inputs computes at inference under the bound `precision` on
    `device_type` (the rules in the module docstring). `rows`: the rows of one call, where the
    caller knows them (None: any number); `weight_bytes`: its fp32 weight's bytes (one direction)."""
    onednn = capabilities.onednn and device_type == "cpu"
    if precision == "int8" and capabilities.int8 and device_type == "cpu" and inputs >= MIN_INT8_INPUTS:
        low = Product("int8", "int8")
    elif precision == "bf16" and capabilities.native_bf16:
        low = Product("bf16", "onednn" if onednn else "torch")
    else:
        return Product("fp32", "onednn" if onednn else "torch")
    if rows == 1 and weight_bytes is not None and weight_bytes <= ONE_ROW_FP32_MAX_BYTES:
        return EXACT
    return low


class RowProducts(NamedTuple):
    """A weight's products as the decider answered for a call of one row and of several (the LSTM's
    recurrent products, whose rows change from step to step)."""

    one_row: Product
    rows: Product

    def at(self, rows: int) -> Product:
        return self.one_row if rows == 1 else self.rows

    @property
    def all_low(self) -> bool:
        """Whether every product of the weight is low precision (it can be held converted only)."""
        return self.one_row.low and self.rows.low


def row_products(
    precision: str, device_type: str, inputs: int, weight_bytes: int, capabilities: Capabilities
) -> RowProducts:
    """`decide_product` of a weight for one row and for any number of rows."""
    one = decide_product(precision, device_type, inputs, 1, weight_bytes, capabilities=capabilities)
    several = decide_product(precision, device_type, inputs, None, weight_bytes, capabilities=capabilities)
    return RowProducts(one, several)


EXACT_ROWS = RowProducts(EXACT, EXACT)

# oneDNN's prepacked layout depends on the batch size it is prepared for: the LSTM's recurrent
# products are a few rows, the linears' and the char CNN's hundreds
LSTM_ROWS_HINT = 32
WORDS_ROWS_HINT = 1024


def convert(weight: torch.Tensor, product: Product, bias: torch.Tensor | None = None, rows_hint: int = 32) -> Any:
    """A [K, N] fp32 weight (x·W orientation) in the form `product` reads: int8 packed (with `bias`,
    `kernels.int8.pack`), bf16 prepacked for oneDNN ([N, K], `kernels.bf16.PrepackedBf16`) or a
    plain bf16 copy ([K, N], "torch")."""
    weight = weight.detach()
    if product.dtype == "int8":
        return int8_kernel.pack(weight, bias)
    if product.dtype == "bf16" and product.kernel == "onednn":
        transposed = weight.t().to(torch.bfloat16, memory_format=torch.contiguous_format)
        return bf16_kernel.PrepackedBf16(transposed, rows_hint)
    if product.dtype == "bf16":
        return weight.to(torch.bfloat16, memory_format=torch.contiguous_format)
    raise ValueError(f"an fp32 product reads the fp32 weight itself, not a converted form: {product}")


_DERIVED = DerivedWeights()


class ConvertsWeights(nn.Module):
    """A module whose weights' products the decider binds (`weight_products`), and which can hold a
    weight all of whose products are low precision in that form only: `release_fp32` swaps such
    fp32 weights for `convert`ed ones (`converted[name]`, per direction for a [2, K, N] weight), and
    `restore_fp32` puts fp32 weights back (read from the model's files: `hf.fp32_weights`).

    A released weight is a parameter of None (no state-dict entry, no gradient; its place kept): the
    model's `state_dict` reads it back from its files."""

    converted: dict[str, Any]

    def weight_products(self) -> Mapping[str, RowProducts]:
        """name → how the products of that weight compute, as bound (the weight in x·W orientation)."""
        raise NotImplementedError

    def weight_xw(self, name: str) -> torch.Tensor:
        """The named fp32 weight as [K, N] (x·W), or [2, K, N] for the LSTM's two directions."""
        raise NotImplementedError

    def releasable(self) -> list[str]:
        """The weights held in fp32 whose every product is low precision."""
        held = self._parameters
        return [name for name, p in self.weight_products().items() if p.all_low and held.get(name) is not None]

    def convert_weight(self, name: str, weight: torch.Tensor) -> Any:
        """`weight` ([K, N] or [2, K, N]) in the form its products read."""
        product = self.weight_products()[name].rows
        if weight.dim() == 3:
            return [convert(w, product, rows_hint=LSTM_ROWS_HINT) for w in weight]
        return convert(weight, product, rows_hint=WORDS_ROWS_HINT)

    def converted_form(self, name: str) -> Any:
        """The named weight in the form its low-precision products read: the module's own once the
        fp32 weight is released, else made from the fp32 weight and kept beside the module until one
        of its parameters changes (on the calling thread)."""
        if name in self.converted:
            return self.converted[name]
        key = weights_key(*self._parameters.values())
        return _DERIVED.get(self, "converted_" + name, key, lambda: self.convert_weight(name, self.weight_xw(name)))

    def drop_converted(self) -> None:
        """Frees the converted forms kept beside the module (not those it holds in place of fp32 weights)."""
        _DERIVED.drop(self)

    def release_fp32(self) -> dict[str, tuple[tuple[int, ...], bool]]:
        """Swaps the `releasable` fp32 weights for their converted forms; returns name → (shape,
        requires_grad) of each weight released."""
        released = {}
        for name in self.releasable():
            param = self._parameters[name]
            assert param is not None
            with torch.inference_mode(False), torch.no_grad():  # normal tensors, whatever mode binds
                self.converted[name] = self.convert_weight(name, self.weight_xw(name))
            released[name] = (tuple(param.shape), param.requires_grad)
            self._parameters[name] = None  # (in its place: the state dict keeps its order)
        return released

    def restore_fp32(self, tensors: Mapping[str, torch.Tensor], requires_grad: Mapping[str, bool]) -> None:
        """Puts fp32 weights back (as parameters, `requires_grad` as they were) in place of their
        converted forms."""
        for name, tensor in tensors.items():
            self.converted.pop(name, None)
            self._parameters[name] = nn.Parameter(tensor, requires_grad=requires_grad.get(name, True))


__all__ = [
    "EXACT",
    "EXACT_ROWS",
    "LSTM_ROWS_HINT",
    "MIN_INT8_INPUTS",
    "ONE_ROW_FP32_MAX_BYTES",
    "WORDS_ROWS_HINT",
    "Capabilities",
    "ConvertsWeights",
    "Product",
    "RowProducts",
    "convert",
    "decide_product",
    "device_capabilities",
    "row_products",
]
