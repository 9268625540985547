// Stand-in (empty): named by ggml-cuda/vendors/hip.h, unused by the MMVQ and q8_1 device code (ci/ggml-gpu).
#pragma once
