"""Exact fast kernels for the biLM of `spacy_elmo.hf.modeling_elmo` (and its opt-in approximations).

The readable forward pass in `modeling_elmo.py` is the definition; everything here computes the
same function (up to float rounding, ~1e-7) unless it says otherwise, and is chosen explicitly by
the model (`ElmoConfig.lstm_implementation`), never by a side effect.  This package imports
nothing from the model: it works on plain tensors and callables.

* `char_cnn`     – the char CNN on distinct words only, with the columns no window can see cut, as one
                   product over the widest windows (inference) or per filter bank (training).
* `token_cache`  – a bounded LRU of token vectors keyed by a word's character ids.
* `packed_lstm`  – the biLSTM over a packed, length-sorted batch, in place, without autograd
                   (a layer's two directions at the same time on two threads, when there are two).
* `fused_lstm`   – one LSTM layer as one autograd Function (training): batched products, fused backward.
* `products`     – the one decider of how each product computes at inference (fp32, bf16 or int8, and
                   its kernel), and the converted weights a low-precision product reads.
* `int8`         – int8 weights × activations quantized per call (opt-in, approximate, CPU with VNNI).
* `bf16`         – bf16 products with weights converted once, fp32 around them (opt-in, approximate).
* `linear`       – the biLM's linear layer, its product as the decider bound it (fp32 through oneDNN).
* `weights`      – derived-weight caches (oneDNN-prepacked, low-precision copies) and scratch buffers.
* `cuda_graphs`  – CUDA graphs of a tensor function, one per bucketed input shape (GPU inference).
* `capabilities` – checks for the private torch APIs used above, with exact fallbacks.
"""

from . import bf16, char_cnn, cuda_graphs, int8, packed_lstm, products
from .capabilities import (
    autocast_dtype,
    autocast_product_dtype,
    bf16_products,
    int8_available,
    int8_products,
    native_bf16_available,
    onednn_linear_available,
)
from .char_cnn import encode_words, pooled_convolutions, pooled_widest_windows, used_columns, widest_windows_fit
from .fused_lstm import FusedLstmFunction, lstm_layer_fused
from .linear import ProductLinear
from .packed_lstm import LstmWeights, PackedLayout, bilstm_packed, run_layer_packed
from .products import (
    Capabilities,
    ConvertsWeights,
    Product,
    RowProducts,
    decide_product,
    device_capabilities,
    row_products,
)
from .token_cache import TokenEmbeddingCache
from .weights import weights_key

__all__ = [
    "bf16",
    "char_cnn",
    "cuda_graphs",
    "int8",
    "packed_lstm",
    "products",
    "Capabilities",
    "ConvertsWeights",
    "Product",
    "ProductLinear",
    "RowProducts",
    "decide_product",
    "device_capabilities",
    "row_products",
    "autocast_dtype",
    "autocast_product_dtype",
    "bf16_products",
    "native_bf16_available",
    "int8_available",
    "int8_products",
    "onednn_linear_available",
    "encode_words",
    "pooled_convolutions",
    "pooled_widest_windows",
    "used_columns",
    "widest_windows_fit",
    "FusedLstmFunction",
    "lstm_layer_fused",
    "LstmWeights",
    "PackedLayout",
    "bilstm_packed",
    "run_layer_packed",
    "TokenEmbeddingCache",
    "weights_key",
]
