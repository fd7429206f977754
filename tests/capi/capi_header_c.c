/* grist_capi.h compiled as C (C99): the header is a C header, and its structs have the same size
 * in C as in C++ (capi_test.cc compares). */
#include "python/capi/grist_capi.h"

size_t grist_capi_test_c_sizeof(int which);

size_t grist_capi_test_c_sizeof(int which) {
  switch (which) {
    case 0: return sizeof(grist_loader_options);
    case 1: return sizeof(grist_loader_info);
    case 2: return sizeof(grist_synthetic_release_options);
    case 3: return sizeof(grist_ckpt_writer_options);
    default: return 0;
  }
}
