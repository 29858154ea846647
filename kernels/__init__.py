"""The llama.cpp backend of KV Studio: build variants and verification of the int8-K pair.

`python -m kernels variants`            lists the build variants and their CMAKE_ARGS
`python -m kernels cmake-args VARIANT`   prints one variant's CMAKE_ARGS (for `pip install`)
`python -m kernels build VARIANT`        builds llama-cpp-python with them (GPU variants with
                                         our kernel patches, kernels/patches)
`python -m kernels.patch_set apply DIR [N]`  applies the first N patches (default all) to llama.cpp
`python -m kernels verify [MODEL]`       checks the int8-K Flash Attention pair is compiled and used
`python -m kernels isa-proof`            counts the int8 dot instruction in RDNA3 FA kernels
                                         (as root)
`python -m kernels isa-proof --cuda`     the same for NVIDIA (nvcc, cuobjdump; IDP.4A, sm_90)
`python -m kernels isa-count LIB`        counts it in an installed libggml-cuda.so / libggml-hip.so
"""
