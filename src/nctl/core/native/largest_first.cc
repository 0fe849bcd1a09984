// A reservoir merge's weighted sample (docs/algorithm.md §4.3, §6.11), as an XLA FFI handler
// (nctl_largest_first): the k largest keys of each row by one partial sort, where XLA:CPU sorts each row
// twice.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// The indices of the k largest scores of each row of `score` ([..., m] float64, no NaN), largest first,
// equal scores in index order (the order of jax.lax.top_k): a reservoir merge's weighted sample (§4.3),
// one partial sort per row where XLA:CPU sorts each row twice.
ffi::Error LargestFirst(ffi::Buffer<ffi::F64> score, ffi::ResultBuffer<ffi::S32> out) {
  const int64_t m = score.dimensions().back(), k = out->dimensions().back();
  if (m == 0 || k > m) return ffi::Error::InvalidArgument("nctl largest first: k exceeds the row");
  const int64_t rows = score.element_count() / m;
  std::vector<int32_t> order(m);
  for (int64_t i = 0; i < rows; ++i) {
    const double* s = score.typed_data() + i * m;
    for (int64_t j = 0; j < m; ++j) order[j] = static_cast<int32_t>(j);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [s](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
    std::copy(order.begin(), order.begin() + k, out->typed_data() + i * k);
  }
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(NctlLargestFirst, LargestFirst,
                              ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F64>>().Ret<ffi::Buffer<ffi::S32>>());
